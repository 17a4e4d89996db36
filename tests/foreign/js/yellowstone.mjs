// Triton's @triton-one/yellowstone-grpc (its Rust client through N-API), unchanged, against the gateway's
// gRPC port: the API key as x-token. Env: GRPC_ENDPOINT (http://host:port), API_KEY.
// Prints one JSON line per step; exits non-zero at the first failure.
import Client, { CommitmentLevel } from "@triton-one/yellowstone-grpc";

const step = (name, value) => console.log(JSON.stringify({ step: name, value }, (_, v) => (typeof v === "bigint" ? v.toString() : v)));
const client = new Client(process.env.GRPC_ENDPOINT, process.env.API_KEY, undefined);
await client.connect();
step("connect", true);
step("getVersion", await client.getVersion());
step("getSlot", await client.getSlot(CommitmentLevel.CONFIRMED));
step("getLatestBlockhash", await client.getLatestBlockhash(CommitmentLevel.CONFIRMED));

// The request goes with the call (the 7.x client's way); a stream opened empty and written later works too
const stream = await client.subscribe({
  slots: { "my-slots": {} },
  blocksMeta: { "my-blocks-meta": {} },
  accounts: {},
  transactions: {},
  transactionsStatus: {},
  blocks: {},
  entry: {},
  accountsDataSlice: [],
  commitment: CommitmentLevel.CONFIRMED,
});
const got = { slot: 0, blockMeta: 0, filters: new Set() };
const done = new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`no slot and block meta within 30 s: ${JSON.stringify(got)}`)), 30_000);
  stream.on("error", reject);
  stream.on("data", (update) => {
    for (const name of update.filters ?? []) got.filters.add(name);
    if (update.slot) got.slot += 1;
    if (update.blockMeta) got.blockMeta += 1;
    if (got.slot >= 2 && got.blockMeta >= 1) {
      clearTimeout(timer);
      resolve();
    }
  });
});
await done;
step("subscribe", { slots: got.slot, blocksMeta: got.blockMeta, filters: [...got.filters].sort() });
stream.destroy();
process.exit(0);
