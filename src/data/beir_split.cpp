#include "spread/data/beir_split.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <unordered_set>

#include "spread/data/beir.h"
#include "spread/data/pairs.h"
#include "spread/util/csv.h"
#include "spread/util/error.h"
#include "spread/util/file.h"

namespace spread {
namespace {
namespace fs = std::filesystem;

std::string read_or_fail(const std::string& path) {
  auto text = read_whole_file(path);
  if (!text) throw user_error(path, 0, "", "cannot read this file", "a BEIR folder holds corpus.jsonl, queries.jsonl "
                              "and qrels/NAME.tsv");
  return *text;
}

std::string join_row(const std::vector<std::string>& fields) {
  std::string row;
  for (const auto& f : fields) row += (row.empty() ? "" : "\t") + f;
  return row + "\n";
}

}  // namespace

BeirSplitResult split_beir_queries(const BeirSplitRequest& r) {
  if (!(r.dev_fraction > 0 && r.dev_fraction < 1))
    throw UserError(fmt::format("--dev-fraction {}: give a fraction between 0 and 1, such as 0.1", r.dev_fraction));
  const BeirData data = load_beir(r.source, r.qrels);
  const int64_t n = int64_t(data.query_ids.size());
  const int64_t n_dev = std::llround(r.dev_fraction * double(n));
  if (n_dev < 1 || n_dev >= n)
    throw UserError(fmt::format("--dev-fraction {} of {} queries leaves {} for dev and {} for training: both need "
                                "at least one", r.dev_fraction, n, n_dev, n - n_dev));
  const std::vector<int64_t> order = seeded_permutation(n, r.seed, kBeirSplitStream);
  std::unordered_set<std::string> dev;
  for (int64_t i = 0; i < n_dev; ++i) dev.insert(data.query_ids[size_t(order[size_t(i)])]);

  BeirSplitResult result;
  for (const auto& id : data.query_ids) (dev.count(id) ? result.dev_queries : result.train_queries).push_back(id);
  std::string train_tsv = "query-id\tcorpus-id\tscore\n", dev_tsv = train_tsv;
  const std::string qrels_text = read_or_fail(data.qrels_file);
  RowReader rows(qrels_text, RowFormat::tsv);
  TextRow row;
  for (bool first = true; rows.next(row); first = false) {
    if (first && row.fields.size() == 3 && !parse_qrels_score(row.fields[2])) continue;  // the header
    const bool to_dev = !row.fields.empty() && dev.count(row.fields[0]);
    (to_dev ? dev_tsv : train_tsv) += join_row(row.fields);
    ++(to_dev ? result.dev_rows : result.train_rows);
  }

  check_output_folder(r.out, "--out");
  fs::create_directories(fs::path(r.out) / "qrels");
  OutputFileGroup files;
  for (const char* name : {"corpus.jsonl", "queries.jsonl"}) {
    const std::string text = read_or_fail((fs::path(r.source) / name).string());
    files.add((fs::path(r.out) / name).string(), [&](std::ostream& os) { os << text; });
  }
  files.add((fs::path(r.out) / "qrels" / "train.tsv").string(), [&](std::ostream& os) { os << train_tsv; });
  files.add((fs::path(r.out) / "qrels" / "dev.tsv").string(), [&](std::ostream& os) { os << dev_tsv; });
  files.commit();
  return result;
}

}  // namespace spread
