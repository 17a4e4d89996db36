// Builds the account page into dist/ (served by the gateway at /app/: gateway/webui): one ES module bundled
// by esbuild from src/main.js and what it imports from node_modules (package-lock.json pins them), the
// modules it imports on demand as chunks beside it, plus the page and its stylesheet copied as they are.
// Nothing is fetched from elsewhere when the page runs.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const out = new URL("./dist/", import.meta.url);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [new URL("./src/main.js", import.meta.url).pathname],
  outdir: out.pathname,
  entryNames: "app",
  chunkNames: "chunks/[name]-[hash]", // loaded on demand: @solana/kit only when a deposit is paid from the page
  bundle: true,
  splitting: true,
  format: "esm",
  target: ["es2022"],
  minify: true,
  sourcemap: false,
  legalComments: "linked",
  logLevel: "warning",
  // The TypeScript client from its sources (clients/js/src; the Makefile rebuilds the page when they
  // change), its packages (@noble/hashes, @solana/rpc-spec-types) found in this lock's node_modules.
  alias: { "solana-credit-gateway-client": fileURLToPath(new URL("../clients/js/src/index.ts", import.meta.url)) },
  nodePaths: [fileURLToPath(new URL("./node_modules", import.meta.url))],
});
for (const name of ["index.html", "app.css", "favicon.svg"]) copyFileSync(new URL(`./src/${name}`, import.meta.url), new URL(name, out));
writeFileSync(new URL("BUILT", out), `built ${new Date().toISOString()}\n`);
