#pragma once
// Token shards from text: what `spread tokenize --shards OUT_DIR` does, streaming, in memory bounded whatever the
// size of the input, on all threads.
//
// Documents: each line of a text file is one document; each line of a `.jsonl` file is a JSON object whose
// `column` string is one (at most 128 levels deep, util/json_depth.h). Lines are split at "\n" only (a "\r" stays
// in the text). Empty documents (an empty line, an empty string) are skipped. A document's tokens are its ids
// without the post-processor's specials (the reference's encode(text, add_special_tokens=False); a Hugging Face
// file's truncation and padding are left out: a document is never cut), then the end-of-text id.
// The end of text: the token `eot` names (a vocabulary or added token, or text that encodes to exactly one id);
// by default the tokenizer's own: a run tokenizer's eos_id(), else (a Hugging Face one) the first special token
// among <|endoftext|>, </s>, <|end_of_text|>, <eos>, [SEP]. None: UserError asking for --eot.
//
// Output, in OUT_DIR: with val_tokens > 0, the first whole documents up to at least that many tokens go to
// val_000000.bin; then train_000000.bin, train_000001.bin, ... of shard_tokens tokens each, the last one shorter.
// A document may span two (or more) training shards, as llm.c's fineweb.py cuts them; the stream read in name
// order is the documents in input order. Each shard is an llm.c shard (data/token_file.h): uint16 tokens (version
// 1) when the vocabulary has at most 65,536 ids, else uint32 (version 2), one width for all of them. Its header
// records its text's UTF-8 byte count (the end of text adds none); a document split between shards gives each
// part of its bytes in proportion to its tokens there, so the shards' counts add up to the text's exactly.
//
// Promises: each shard is written under a temporary name and renamed when complete; an error part-way (bad
// input, a full disk) leaves no shard: the temporaries and the shards this run completed are removed, so that a
// rerun after the fix starts clean (a killed run leaves its complete shards; its temporaries are removed by the
// next run). An OUT_DIR that already holds val_*.bin or train_*.bin is refused: no shard is ever overwritten, nor
// deleted unless this run made it. Memory: a reader cuts the inputs into chunks of
// whole lines (chunk_bytes of text, a line longer than that whole), at most 2 per thread in flight, encoded on
// `threads` threads and written in input order; the rest is the tokenizer and one write buffer.
// Bad input is a UserError (exit 2) naming FILE:LINE or the option: invalid UTF-8, a JSONL line that is no
// object or lacks the column or holds no string there, an --in pattern that matches nothing, a shard_tokens
// outside 1..2^31-1 (the header's count is an int32), an unknown eot.
//
// Progress: a line on stderr at most every 2 s (bytes done of the total, MB/s, tokens, shards, ETA), and
// OUT_DIR/tokenize.jsonl (appended): those lines as {"event": "progress", ...}, then {"event": "done", ...} with
// files, documents, bytes, tokens, shards, seconds, MB/s, the tokenizer and the end-of-text id.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spread {

struct ShardRequest {
  std::string tokenizer;            // a Hugging Face tokenizer file or folder, or a spread run directory
  std::vector<std::string> inputs;  // paths or glob patterns, in this order; a pattern's matches in name order
  std::string out_dir;
  int64_t shard_tokens = 100'000'000;
  int64_t val_tokens = 0;
  std::string column = "text";      // the document's key in each line of a .jsonl input
  std::string eot;                  // the end-of-text token; "" = the tokenizer's own
  int threads = 0;                  // 0 = every core (std::thread::hardware_concurrency())
  int64_t chunk_bytes = 4 << 20;    // text per unit of work
  bool print_progress = true;       // the stderr lines (tokenize.jsonl is always written)
};

struct ShardResult {
  std::vector<std::string> shards;  // the files written, val first
  int64_t files = 0, documents = 0, tokens = 0, val_tokens = 0;
  uint64_t input_bytes = 0;     // of the input files
  uint64_t document_bytes = 0;  // of the documents' text, as the shards record it
  int32_t eot_id = -1;
  std::string tokenizer;        // "hf tokenizer PATH" or "run tokenizer (KIND) of RUN_DIR"
  double seconds = 0;
};

ShardResult write_shards(const ShardRequest& request);

// The document of one line of a .jsonl input: the string under `column`. UserError at `where` (FILE:LINE) when the
// line is not JSON, nests past 128 levels, is no object, or holds no string under `column`.
std::string jsonl_document(std::string_view line, const std::string& column, const std::string& where);

}  // namespace spread
