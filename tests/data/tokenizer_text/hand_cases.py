"""Small hand-made tokenizers, one per component and option, and what the reference library (tokenizers 0.22)
gives on one text each: tests/test_hf_tokenizer.cpp's HfComponents cases. Usage: hand_cases.py OUT.json
(offsets are the Python binding's character offsets; "text" is a string, or [first, second] for a pair)."""
import json
from tokenizers import Tokenizer
def wp(normalizer, pre, vocab, extra=None, post=None, decoder=None, added=None):
    j = {"version":"1.0","truncation":None,"padding":None,"added_tokens":added or [],"normalizer":normalizer,"pre_tokenizer":pre,
         "post_processor":post,"decoder":decoder or {"type":"WordPiece","prefix":"##","cleanup":True},
         "model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":(extra or 100),
                  "vocab":{t:i for i,t in enumerate(vocab)}}}
    return j
V=["[UNK]","[CLS]","[SEP]","hello","world","##s",",","!","un","##aff","##able","中","cafe","a","b","x","##x","e","ﬁ","fi","##fi","i̇","1","2","3","12","▁a","▁b","▁","##llo","he","'"]
bert_norm={"type":"BertNormalizer","clean_text":True,"handle_chinese_chars":True,"strip_accents":None,"lowercase":True}
bert_pre={"type":"BertPreTokenizer"}
cases = {
 "bert_basic": (wp(bert_norm, bert_pre, V), "Héllo, WORLDs!"),
 "wordpiece_greedy": (wp(bert_norm, bert_pre, V), "unaffable hello"),
 "chinese_and_clean": (wp(bert_norm, bert_pre, V), "a中\u0000b\u200bx\tİ"),
 "max_chars": (wp(bert_norm, bert_pre, V, extra=4), "hellos a"),
 "nfkc": (wp({"type":"NFKC"}, {"type":"WhitespaceSplit"}, V), "ﬁ ｘ"),
 "nfd_strip": (wp({"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"StripAccents"},{"type":"Lowercase"}]}, {"type":"Whitespace"}, V), "Café,x"),
 "digits": (wp(None, {"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits","individual_digits":False}]}, V), "a123b 12"),
 "digits_individual": (wp(None, {"type":"Digits","individual_digits":True}, V), "a12"),
 "punct_contiguous": (wp(None, {"type":"Punctuation","behavior":"Contiguous"}, V), "a,,!b"),
 "metaspace": (wp(None, {"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":True}, V), "a b"),
 "split_regex_removed": (wp(None, {"type":"Split","pattern":{"Regex":"\\d+"},"behavior":"Removed","invert":False}, V), "a12b3x"),
 "split_string_next": (wp(None, {"type":"Split","pattern":{"String":","},"behavior":"MergedWithNext","invert":False}, V), "a,b"),
 "replace_prepend_strip": (wp({"type":"Sequence","normalizers":[{"type":"Strip","strip_left":True,"strip_right":True},{"type":"Replace","pattern":{"String":"o"},"content":"ooo"},{"type":"Prepend","prepend":"x"}]}, {"type":"Whitespace"}, V), "  hello  "),
 "added_tokens": (wp(bert_norm, bert_pre, V, added=[
     {"id":1,"content":"[CLS]","single_word":False,"lstrip":True,"rstrip":True,"normalized":False,"special":True},
     {"id":32,"content":"xx","single_word":True,"lstrip":False,"rstrip":False,"normalized":True,"special":False}]),
   "a  [CLS]  b XX axx xx"),
 "template_pair": (wp(bert_norm, bert_pre, V, post={"type":"TemplateProcessing",
     "single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}}],
     "pair":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"[SEP]","type_id":0}},{"Sequence":{"id":"B","type_id":1}},{"SpecialToken":{"id":"[SEP]","type_id":1}}],
     "special_tokens":{"[CLS]":{"id":"[CLS]","ids":[1],"tokens":["[CLS]"]},"[SEP]":{"id":"[SEP]","ids":[2],"tokens":["[SEP]"]}}}), ("hello", "world")),
 "truncation_pad_pair": (dict(wp(bert_norm, bert_pre, V, post={"type":"BertProcessing","sep":["[SEP]",2],"cls":["[CLS]",1]}),
     truncation={"direction":"Right","max_length":7,"strategy":"LongestFirst","stride":0},
     padding={"strategy":{"Fixed":9},"direction":"Left","pad_to_multiple_of":None,"pad_id":13,"pad_type_id":1,"pad_token":"a"}),
   ("hello world hello world hello", "a b x a")),
 "truncation_left_single": (dict(wp(bert_norm, bert_pre, V, post={"type":"BertProcessing","sep":["[SEP]",2],"cls":["[CLS]",1]}),
     truncation={"direction":"Left","max_length":4,"strategy":"LongestFirst","stride":0},
     padding={"strategy":"BatchLongest","direction":"Right","pad_to_multiple_of":3,"pad_id":0,"pad_type_id":0,"pad_token":"[UNK]"}),
   "a b x hello world"),
 "bert_processing_pair": (wp(bert_norm, bert_pre, V, post={"type":"BertProcessing","sep":["[SEP]",2],"cls":["[CLS]",1]}), ("a", "b x")),
}
B={"h":0,"e":1,"l":2,"o":3,"Ġ":4,"w":5,"r":6,"d":7,"he":8,"ll":9,"hell":10,"hello":11,"Ġw":12,"or":13,"Ġwor":14,"ld":15,"!":16,"Ã":17,"©":18,"<unk>":19}
M=["h e","l l","he ll","hell o","Ġ w","o r","Ġw or","l d"]
def bpe(pre, post=None, decoder=None, **model):
    m={"type":"BPE","dropout":None,"unk_token":None,"continuing_subword_prefix":None,"end_of_word_suffix":None,"fuse_unk":False,"byte_fallback":False,"ignore_merges":False,"vocab":B,"merges":M}
    m.update(model)
    return {"version":"1.0","truncation":None,"padding":None,"added_tokens":[],"normalizer":None,"pre_tokenizer":pre,"post_processor":post,"decoder":decoder,"model":m}
bl={"type":"ByteLevel","add_prefix_space":False,"trim_offsets":True,"use_regex":True}
cases.update({
 "bytelevel_bpe": (bpe(bl, decoder=dict(bl)), "hello world!"),
 "bytelevel_prefix_trim": (bpe(dict(bl, add_prefix_space=True), post=dict(bl, add_prefix_space=True), decoder=dict(bl)), "hello  world"),
 "bytelevel_multibyte": (bpe(bl, decoder=dict(bl)), "hé"),
 "bpe_unk_fuse": (bpe(None, unk_token="<unk>", fuse_unk=True), "hexyzo"),
 "bpe_ignore_merges": (bpe(None, ignore_merges=True, vocab=dict(B, hlo=20)), "hlo"),
 "roberta_pair": (bpe(bl, post={"type":"RobertaProcessing","sep":["!",16],"cls":["<unk>",19],"trim_offsets":True,"add_prefix_space":False}), ("hello", " world")),
})
out = {}
import sys
for name, (j, text) in cases.items():
    t = Tokenizer.from_str(json.dumps(j))
    e = t.encode(*text) if isinstance(text, tuple) else t.encode(text)
    # byte offsets: recompute from char offsets
    out[name] = {"json": j, "text": text, "ids": e.ids, "tokens": e.tokens, "type_ids": e.type_ids,
                 "offsets": e.offsets, "attention_mask": e.attention_mask,
                 "special_tokens_mask": e.special_tokens_mask, "decoded": t.decode(e.ids)}
json.dump(out, open(sys.argv[1], "w", encoding="utf-8"), ensure_ascii=False, indent=0)
