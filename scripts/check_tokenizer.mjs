// Independent check of an exported tokenizer.json: @huggingface/tokenizers (pure JavaScript, from npm) loads it and
// must give spread's ids on every line, and decode them back to the line (for Unigram models, with the byte
// fallback of the Rust library applied to the package's output, see encodeIds).
//
//   node check_tokenizer.mjs PACKAGE_DIR EXPORT_DIR LINES.txt IDS.jsonl [--framed]
//
// PACKAGE_DIR: the installed package (node_modules/@huggingface/tokenizers). LINES.txt: one text per line.
// IDS.jsonl: spread's ids of each line as a JSON array per line. --framed: the ids are an encoder's
// "[CLS] text [SEP]", encoded with the post processor (add_special_tokens) and decoded without the special tokens.
// Exit 0 when everything matches, 1 otherwise.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkg, dir, linesFile, idsFile, mode] = process.argv.slice(2);
const framed = mode === "--framed";
const { Tokenizer } = await import(pathToFileURL(join(pkg, "dist", "tokenizers.mjs")).href);
const tokenizerJson = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
const tokenizer = new Tokenizer(tokenizerJson, JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")));
const lines = readFileSync(linesFile, "utf8").split("\n");

// Hugging Face tokenizers (Rust) give a Unigram model with byte_fallback the UTF-8 bytes of an unknown character as
// "<0xNN>" pieces; this JavaScript port returns the unknown id instead (it keeps the character as the token's text).
// Apply that one documented rule on top of its output, so that everything else is the package's own segmentation.
const model = tokenizer.model;
const unigramByteFallback = tokenizerJson.model.type === "Unigram" && tokenizerJson.model.byte_fallback === true;
let fallbacks = 0;
function encodeIds(line) {
  const { ids, tokens } = tokenizer.encode(line, { add_special_tokens: framed });
  if (!unigramByteFallback) return ids;
  const out = [];
  ids.forEach((id, i) => {
    if (id !== model.unk_token_id || tokens[i] === model.unk_token) {
      out.push(id);
      return;
    }
    ++fallbacks;
    for (const byte of new TextEncoder().encode(tokens[i])) {
      const piece = `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`;
      out.push(model.tokens_to_ids.get(piece));
    }
  });
  return out;
}
const expected = readFileSync(idsFile, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
let idMismatches = 0, decodeMismatches = 0;
for (let i = 0; i < expected.length; ++i) {
  const ids = encodeIds(lines[i]);
  if (JSON.stringify(ids) !== JSON.stringify(expected[i])) {
    if (idMismatches++ < 3)
      console.log(`line ${i + 1}: ids ${JSON.stringify(ids)} != spread's ${JSON.stringify(expected[i])}`);
  }
  // (the package refuses to decode an empty list)
  const text = expected[i].length === 0 ? "" : tokenizer.decode(expected[i], { skip_special_tokens: framed });
  if (text !== lines[i]) {
    if (decodeMismatches++ < 3) console.log(`line ${i + 1}: decodes to ${JSON.stringify(text)}`);
  }
}
console.log(`${expected.length} lines: ${idMismatches} id mismatches, ${decodeMismatches} decode mismatches` +
            (unigramByteFallback ? `, ${fallbacks} unknown runs given byte pieces` : ""));
process.exit(idMismatches === 0 && decodeMismatches === 0 ? 0 : 1);
