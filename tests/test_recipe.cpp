// Recipe parsing: types, ranges, unknown keys and overrides, with messages that name file, line and key.
#include <gtest/gtest.h>

#include "spread/config/recipe.h"
#include "spread/util/error.h"

using spread::parse_recipe;
using spread::Recipe;
using spread::UserError;

namespace {

std::string error_of(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_recipe(toml, "r.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Recipe, DefaultsAndValues) {
  Recipe r = parse_recipe("[train]\nlr = 3e-4\nbatch_size = 8\n[model]\nn_layer = 6\n", "r.toml");
  EXPECT_DOUBLE_EQ(r.train.lr, 3e-4);
  EXPECT_EQ(r.train.batch_size, 8);
  EXPECT_EQ(r.model.n_layer, 6);
  EXPECT_EQ(r.model.n_head, 4);  // default
  EXPECT_EQ(r.run_dir(), "checkpoints/run");
}

TEST(Recipe, UnknownKeyNamesFileLineAndKey) {
  std::string e = error_of("[train]\nlr = 1e-3\nlearning_rate = 1e-3\n");
  EXPECT_NE(e.find("r.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("train.learning_rate"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("warmup_steps"), std::string::npos) << "hint lists valid keys: " << e;
}

TEST(Recipe, UnknownSection) {
  std::string e = error_of("[optimiser]\nlr = 1\n");
  EXPECT_NE(e.find("r.toml:1"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown section"), std::string::npos) << e;
}

TEST(Recipe, WrongTypeIsAnError) {
  std::string e = error_of("[train]\n\nbatch_size = \"twelve\"\n");
  EXPECT_NE(e.find("r.toml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("train.batch_size"), std::string::npos) << e;
  EXPECT_NE(e.find("expected an integer"), std::string::npos) << e;
  EXPECT_NE(error_of("[train]\nbatch_size = 1.5\n").find("expected an integer"), std::string::npos);
  EXPECT_NE(error_of("[model]\nbias = 1\n").find("expected true or false"), std::string::npos);
}

TEST(Recipe, OutOfRangeIsAnError) {
  std::string e = error_of("[model]\ndropout = 1.5\n");
  EXPECT_NE(e.find("model.dropout"), std::string::npos) << e;
  EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  EXPECT_NE(error_of("[train]\nbatch_size = 0\n").find("out of range"), std::string::npos);
  EXPECT_NE(error_of("[tokenizer]\nkind = \"wordpiece\"\n").find("use one of: char, bpe, unigram"), std::string::npos);
}

TEST(Recipe, CrossKeyChecks) {
  EXPECT_NE(error_of("[model]\nn_embd = 130\nn_head = 4\n").find("not divisible"), std::string::npos);
  EXPECT_NE(error_of("[train]\nlr = 1e-4\nmin_lr = 1e-3\n").find("train.min_lr"), std::string::npos);
  EXPECT_NE(error_of("[data]\nsource = \"text\"\n").find("data.path"), std::string::npos);
  EXPECT_NE(error_of("[model]\nn_layer = 2\n[loss.dispersion]\nlayers = [3]\n").find("does not exist"),
            std::string::npos);
}

TEST(Recipe, ModernBlockKeysParseAndTheirContradictionsNameTheKey) {
  Recipe r = parse_recipe("[model]\npositions = \"rope\"\nrope_theta = 500000.0\nnorm = \"rmsnorm\"\n"
                          "mlp = \"swiglu\"\nn_kv_head = 2\ntie_embeddings = false\nnorm_bias = false\n",
                          "r.toml");
  EXPECT_EQ(r.model.positions, "rope");
  EXPECT_DOUBLE_EQ(r.model.rope_theta, 500000.0);
  EXPECT_EQ(r.model.norm, "rmsnorm");
  EXPECT_EQ(r.model.mlp, "swiglu");
  EXPECT_EQ(r.model.n_kv_head, 2);
  EXPECT_FALSE(r.model.tie_embeddings);
  EXPECT_FALSE(r.model.norm_bias);
  // n_head 4 (the default) is not a multiple of 3.
  std::string e = error_of("[model]\nn_kv_head = 3\n");
  EXPECT_NE(e.find("model.n_kv_head"), std::string::npos) << e;
  EXPECT_NE(e.find("not a multiple"), std::string::npos) << e;
  e = error_of("[model]\nn_embd = 12\nn_head = 4\npositions = \"rope\"\n");  // head size 3
  EXPECT_NE(e.find("model.positions"), std::string::npos) << e;
  EXPECT_NE(e.find("odd"), std::string::npos) << e;
  e = error_of("[model]\nnorm = \"rmsnorm\"\nnorm_position = \"post\"\n");
  EXPECT_NE(e.find("model.norm"), std::string::npos) << e;
  EXPECT_NE(error_of("[model]\nmlp = \"reglu\"\n").find("use one of: gelu, geglu, swiglu"), std::string::npos);
  EXPECT_NE(error_of("[model]\npositions = \"alibi\"\n").find("use one of: learned, rope"), std::string::npos);
}

// ModernBERT's keys: a window with global layers, a local rotary base, the embedding norm and no norm before block 0.
TEST(Recipe, LocalAttentionKeysParseAndTheirContradictionsNameTheKey) {
  Recipe r = parse_recipe("[model]\npositions = \"rope\"\nattention_window = 128\nglobal_every = 3\n"
                          "local_rope_theta = 10000.0\nembedding_norm = true\nfirst_block_norm = false\n"
                          "mlm_dense_bias = false\n",
                          "r.toml");
  EXPECT_EQ(r.model.attention_window, 128);
  EXPECT_EQ(r.model.global_every, 3);
  EXPECT_DOUBLE_EQ(r.model.local_rope_theta, 10000.0);
  EXPECT_TRUE(r.model.embedding_norm);
  EXPECT_FALSE(r.model.first_block_norm);
  EXPECT_FALSE(r.model.mlm_dense_bias);
  std::string e = error_of("[model]\nglobal_every = 3\n");  // global layers among no local ones
  EXPECT_NE(e.find("model.global_every"), std::string::npos) << e;
  EXPECT_NE(e.find("attention_window"), std::string::npos) << e;
  e = error_of("[model]\nlocal_rope_theta = 10000.0\n");  // learned positions
  EXPECT_NE(e.find("model.local_rope_theta"), std::string::npos) << e;
  e = error_of("[model]\nfirst_block_norm = false\nnorm_position = \"post\"\n");
  EXPECT_NE(e.find("model.first_block_norm"), std::string::npos) << e;
  e = error_of("[model]\nattention_window = -2\n");
  EXPECT_NE(e.find("model.attention_window"), std::string::npos) << e;
}

TEST(Recipe, InvalidTomlNamesTheLine) {
  std::string e = error_of("[train]\nlr = = 3\n");
  EXPECT_NE(e.find("r.toml:2"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid TOML"), std::string::npos) << e;
}

TEST(Recipe, OverridesUseTheSameChecks) {
  Recipe r = parse_recipe("", "r.toml", {"train.lr=3e-4", "run.name=sweep_a", "loss.dispersion.layers=[1,2]",
                                         "data.path=a.txt", "loss.dispersion.enabled=true"});
  EXPECT_DOUBLE_EQ(r.train.lr, 3e-4);
  EXPECT_EQ(r.run.name, "sweep_a");  // a bare word is a string
  EXPECT_EQ(parse_recipe("", "r.toml", {"run.name=nan"}).run.name, "nan");  // even one TOML reads as a float
  EXPECT_EQ(parse_recipe("", "r.toml", {"run.name=1e3"}).run.name, "1e3");
  EXPECT_EQ(r.loss.dispersion.layers_mode, "list");
  EXPECT_EQ(r.loss.dispersion.layers, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r.data.path, std::vector<std::string>{"a.txt"});
  std::string e = error_of("", {"train.lrr=1"});
  EXPECT_NE(e.find("--set"), std::string::npos) << e;
  EXPECT_NE(e.find("train.lrr"), std::string::npos) << e;
  EXPECT_NE(error_of("", {"train.batch_size=-1"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of("", {"train.lr"}).find("section.key=value"), std::string::npos);
}

TEST(Recipe, ResolvedTomlRoundTrips) {
  Recipe r = parse_recipe("[train]\nlr = 0.000314159\n[data]\nsource = \"text\"\npath = [\"a b.txt\", \"c\\\"d.txt\"]\n"
                          "[loss.dispersion]\nenabled = true\nlambda = 0.3\nlayers = \"all\"\n",
                          "r.toml");
  Recipe back = parse_recipe(spread::recipe_to_toml(r), "resolved.toml");
  EXPECT_EQ(back.train.lr, r.train.lr);  // bitwise: the resolved file must not round numbers
  EXPECT_EQ(back.data.path, r.data.path);
  EXPECT_EQ(back.loss.dispersion.lambda, 0.3);
  EXPECT_EQ(back.loss.dispersion.layers_mode, "all");
  EXPECT_EQ(back.model.block_size, r.model.block_size);
  EXPECT_EQ(spread::recipe_to_toml(back), spread::recipe_to_toml(r));
}

TEST(Recipe, DispersionDefaultsAreSpecTwoAndLayerZeroIsTheEmbeddingOutput) {
  Recipe r = parse_recipe("", "r.toml");
  EXPECT_EQ(r.loss.dispersion.tau, 0.5);
  EXPECT_EQ(r.loss.dispersion.clamp, 1e-4);
  EXPECT_TRUE(r.loss.dispersion.after_norm);
  EXPECT_EQ(r.loss.dispersion.layers_mode, "last");
  EXPECT_EQ(parse_recipe("", "r.toml", {"loss.dispersion.layers=[0,4]"}).loss.dispersion.layers,
            (std::vector<int64_t>{0, 4}));
  std::string e = error_of("", {"loss.dispersion.layers=[-1]"});
  EXPECT_NE(e.find("loss.dispersion.layers"), std::string::npos) << e;
  EXPECT_NE(e.find("0 (embedding output)"), std::string::npos) << e;
  EXPECT_NE(error_of("", {"loss.dispersion.layers=[5]"}).find("layer 5 does not exist"), std::string::npos);
}

TEST(Recipe, EarlyProbeKeysGoTogether) {
  Recipe r = parse_recipe("[diagnostics]\nearly_every = 5\nearly_until = 50\n", "r.toml");
  EXPECT_EQ(r.diagnostics.early_every, 5);
  EXPECT_TRUE(r.diagnostics.enabled());
  EXPECT_NE(error_of("[diagnostics]\nearly_every = 5\n").find("diagnostics.early_until"), std::string::npos);
  EXPECT_NE(error_of("[diagnostics]\nearly_until = 5\n").find("diagnostics.early_every"), std::string::npos);
  EXPECT_NE(error_of("[diagnostics]\nearly_every = -1\n").find("out of range"), std::string::npos);
}

// [[data.mix]]: entries parse with their weights and round-trip; each bad entry names its own key and line.
TEST(Recipe, ShardMixEntriesParseAndBadOnesNameTheirKey) {
  const std::string lm = "[train]\nobjective = \"lm\"\n[tokenizer]\nkind = \"hf\"\npath = \"tok.json\"\n";
  const std::string val = "[data]\nval_shards = \"v/*.bin\"\n";
  Recipe r = parse_recipe(lm + val + "[[data.mix]]\nshards = \"a/*.bin\"\nweight = 0.7\n[[data.mix]]\nshards = \"b/*.bin\"\n",
                          "r.toml");
  ASSERT_EQ(r.data.mix.size(), 2u);
  EXPECT_EQ(r.data.mix[0].shards, "a/*.bin");
  EXPECT_EQ(r.data.mix[0].weight, 0.7);
  EXPECT_EQ(r.data.mix[1].weight, 1.0) << "an entry without a weight counts once";
  EXPECT_TRUE(r.data.sharded());
  const Recipe back = parse_recipe(spread::recipe_to_toml(r), "resolved.toml");
  ASSERT_EQ(back.data.mix.size(), 2u);
  EXPECT_EQ(back.data.mix[1].shards, "b/*.bin");
  EXPECT_EQ(back.data.mix[0].weight, 0.7);
  const Recipe set = parse_recipe(lm + val, "r.toml", {"data.mix=[{shards = \"c/*.bin\", weight = 2}]"});
  ASSERT_EQ(set.data.mix.size(), 1u);
  EXPECT_EQ(set.data.mix[0].weight, 2.0);

  const std::string two = "[[data.mix]]\nshards = \"a/*.bin\"\n[[data.mix]]\nshards = \"b/*.bin\"\n";
  const std::vector<std::pair<std::string, std::string>> bad = {  // recipe, what the message must hold
      {two + "weight = 0\n", "r.toml:12: key 'data.mix[1].weight'"},
      {two + "weight = -0.5\n", "data.mix[1].weight"},
      {two + "weight = \"half\"\n", "data.mix[1].weight"},
      {two + "wieght = 1\n", "data.mix[1].wieght"},
      {"[[data.mix]]\nweight = 1\n", "data.mix[0].shards"},
      {"mix = [1, 2]\n", "data.mix[0]"},
  };
  for (const auto& [entries, expected] : bad) {
    const std::string e = error_of(lm + val + entries);
    EXPECT_NE(e.find(expected), std::string::npos) << entries << "\n-> " << e;
  }
  EXPECT_NE(error_of(lm + val + "shards = \"s/*.bin\"\n" + two).find("data.mix"), std::string::npos)
      << "data.shards and data.mix together";
  EXPECT_NE(error_of(lm + two).find("data.val_shards"), std::string::npos) << "a mixture without validation shards";
  EXPECT_NE(error_of(lm + val + two, {"train.objective=mlm"}).find("data.mix"), std::string::npos);
}

// Multiple-choice scores need a next-token head: the refusal names the key and the objectives that have one.
TEST(Recipe, ChoicesNeedALanguageModel) {
  const std::string e = error_of("[train]\nobjective = \"mlm\"\n[eval]\nchoices = \"c.jsonl\"\n");
  EXPECT_NE(e.find("eval.choices"), std::string::npos) << e;
  EXPECT_NE(e.find("train.objective = \"lm\""), std::string::npos) << e;
}
