// Typed access to tokenizer.json fields with UserErrors that name the file and the key (see json_fields.h).
#include "json_fields.h"

#include <cstdint>

#include "spread/util/error.h"

namespace spread::hf {

void Where::fail(const std::string& problem, const std::string& hint) const {
  throw user_error(file, 0, key, problem, hint);
}

void Where::unknown_type(const std::string& kind, const std::string& type) const {
  fail(kind + " type '" + type + "' is not implemented by spread's tokenizer",
       "use a tokenizer.json whose components spread supports (see include/spread/data/hf/tokenizer.h)");
}

const Json& field(const Json& j, const char* name, const Where& w) {
  if (!j.is_object()) w.fail("expected a JSON object");
  auto it = j.find(name);
  if (it == j.end()) w.at(name).fail("missing");
  return *it;
}

bool get_bool(const Json& j, const char* name, bool fallback, const Where& w) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) w.at(name).fail("expected true or false, got " + it->dump());
  return it->get<bool>();
}

std::string get_string(const Json& j, const char* name, const std::string& fallback, const Where& w) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) w.at(name).fail("expected a string, got " + it->dump());
  return it->get<std::string>();
}

int64_t get_int(const Json& j, const char* name, int64_t fallback, const Where& w) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) w.at(name).fail("expected an integer, got " + it->dump());
  // An unsigned number past int64's range would wrap to a negative one.
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(INT64_MAX))
    w.at(name).fail("is " + it->dump() + ", too large");
  return it->get<int64_t>();
}

std::string missing_unk_problem(const std::string& unk_token) {
  return "'" + unk_token + "' is not in the vocabulary, and a text holds a word it cannot spell otherwise";
}

int64_t get_count(const Json& j, const char* name, int64_t fallback, int64_t max, const Where& w) {
  const int64_t n = get_int(j, name, fallback, w);
  if (n < 0 || n > max)
    w.at(name).fail("is " + std::to_string(n) + ", outside 0 to " + std::to_string(max) +
                    " (the reference reads an unsigned count)");
  return n;
}

const Json& get_array(const Json& j, const char* name, const Where& w) {
  const Json& a = field(j, name, w);
  if (!a.is_array()) w.at(name).fail("expected a list");
  return a;
}

std::string type_of(const Json& j, const Where& w) {
  if (!j.is_object()) w.fail("expected a JSON object with a \"type\"");
  return get_string(j, "type", "", w);
}

std::string pattern_of(const Json& j, bool* is_regex, const Where& w) {
  const Json& p = field(j, "pattern", w);
  if (p.is_object() && p.size() == 1) {
    if (p.contains("String") && p["String"].is_string()) { *is_regex = false; return p["String"]; }
    if (p.contains("Regex") && p["Regex"].is_string()) { *is_regex = true; return p["Regex"]; }
  }
  w.at("pattern").fail("expected {\"String\": ...} or {\"Regex\": ...}, got " + p.dump());
}

}  // namespace spread::hf
