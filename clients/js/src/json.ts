// JSON with integers as bigints, as @solana/kit's transports read and write it (a u64 lamport amount does not
// fit a double). Written here rather than imported from @solana/rpc-spec-types, which brings all of
// @solana/errors' message table (about 50 KB) into a page that only wanted to read a number.

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** `JSON.stringify`, bigints written as bare integers. */
export function stringifyJsonWithBigInts(value: unknown): string {
  const marked = JSON.stringify(value, (_, v) => (typeof v === "bigint" ? { $n: `${v}` } : v));
  return marked.replace(/\{"\$n":"(-?\d+)"\}/g, "$1");
}

/** `JSON.parse`, every integer literal (no fraction, no negative exponent) read as a bigint. */
export function parseJsonWithBigInts(json: string): unknown {
  let out = "";
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (inString) {
      out += c;
      if (c === "\\") out += json[++i] ?? "";
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
      continue;
    }
    if (c === "-" || (c >= "0" && c <= "9")) {
      NUMBER.lastIndex = i;
      const match = NUMBER.exec(json);
      if (match) {
        const literal = match[0];
        out += /\.|[eE]-/.test(literal) ? literal : `{"$n":"${literal}"}`;
        i += literal.length - 1;
        continue;
      }
    }
    out += c;
  }
  return JSON.parse(out, (_, v) => (v && typeof v === "object" && typeof v.$n === "string" && Object.keys(v).length === 1 ? toBigInt(v.$n) : v));
}

function toBigInt(literal: string): bigint {
  const [, sign, digits, exponent] = /^(-?)(\d+)(?:[eE]\+?(\d+))?$/.exec(literal) ?? [];
  if (digits === undefined || digits.length + Number(exponent ?? 0) > 1000) throw new SyntaxError(`not an integer JSON can carry: ${literal.slice(0, 40)}`);
  return BigInt(`${sign}${digits}`) * 10n ** BigInt(exponent ?? 0);
}
