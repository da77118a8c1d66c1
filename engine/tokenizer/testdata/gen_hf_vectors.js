// gen_hf_vectors.js writes hf_vectors.json: ids made by Hugging Face
// tokenizers (the npm package "tokenizers", Rust core, version 0.23.2) for
// edge cases the fixture's own vectors do not cover. Run from this
// directory with the package installed somewhere on NODE_PATH:
//
//	npm install --prefix /tmp/hftok tokenizers@0.23.2
//	NODE_PATH=/tmp/hftok/node_modules node gen_hf_vectors.js \
//	    ../../../testdata/tiny-lfm2-moe/model/tokenizer.json > hf_vectors.json
//
// Sections:
//   plain:         the fixture tokenizer; ids = encode(text,
//                  add_special_tokens=false); ids_ordinary = the same with
//                  added_tokens emptied, which for this file (every added
//                  token special) is what split_special_tokens gives.
//   flags:         the fixture plus the added tokens listed in the section
//                  (lstrip, rstrip, single_word, normalized, overlaps).
//   ignore_merges: the fixture with entries added to model.vocab that no
//                  merge builds, encoded with ignore_merges true (ids) and
//                  false (ids_merged).
const { Tokenizer } = require('tokenizers');
const fs = require('fs');
const path = process.argv[2];
const base = JSON.parse(fs.readFileSync(path, 'utf8'));

function load(obj) { return Tokenizer.fromString(JSON.stringify(obj)); }
async function ids(tok, text) {
  const e = await tok.encode(text, null, { addSpecialTokens: false });
  return e.getIds();
}

const rep = (s, n) => s.repeat(n);
const plainTexts = [
  "it'ſa x", "'ſt", "x'ſ", "IT'S", "'Ll", "'lL", "we'RE here", "'VE'd", "don'ſ'S",
  "a\u1C89b \u1C89\u1C89", "\uA7CB\uA7CC test", "\u{105C0}\u{105C1} x", "\u{10D40}\u{10D41}\u{10D42}\u{10D43} 1",
  "\u{13B67}\u{14337} y", "x\u{10D40}y", "'\u{10D40}",
  "a \u00a0 b", "\u3000x", "x\u2028y", "\u0085z", "\v\f x", " \t\n \r\n\t a", "   ", "\n", "\r\r\n\n  x", "tab\t\tend\t",
  "...\n\n", "?!\r\n\r\nx", " ((a))", "a-b_c", " .\n", "\t.x", " \u00a0.",
  "1234567890", "\u0661\u0662\u0663\u0664", "\u00bd\u00be", "\u216b", "\u00b2\u00b3 x2",
  "\u{1F469}\u200D\u{1F469}\u200D\u{1F467}", "\u{1F1FA}\u{1F1F8}\u{1F1EC}\u{1F1E7}",
  "e\u0301", "\u0301a", "\u0928\u092e\u0938\u094d\u0924\u0947", "\uFFFD x", "\uFEFFBOM",
  "<|im_start|>x<|im_end|>", "<|im_start|<|im_end|>", "<|<|pad|>|>", "<think></think>",
  "<|startoftext|><|startoftext|>", "a<|endoftext|>b", "<|im_end|>\n<|im_start|>assistant\n",
  rep(" ", 200) + "x", rep("=", 300), rep("a", 500), rep("ab1+/", 80) + "==", rep("9", 100), rep("\n", 50) + rep(" ", 7),
  rep("na", 40) + " Batman!", rep("\u00e9", 60), rep("\u65e5\u672c", 40),
];

const flagTokens = [
  { content: "<mask>", single_word: false, lstrip: true, rstrip: false, normalized: false, special: true },
  { content: "[R]", single_word: false, lstrip: false, rstrip: true, normalized: false, special: true },
  { content: "word", single_word: true, lstrip: false, rstrip: false, normalized: false, special: false },
  { content: "norm", single_word: false, lstrip: false, rstrip: false, normalized: true, special: false },
  { content: "no", single_word: false, lstrip: false, rstrip: false, normalized: false, special: false },
  { content: "<|im", single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  { content: "<w>", single_word: true, lstrip: true, rstrip: true, normalized: false, special: true },
];
const flagTexts = [
  "I saw a <mask> here", "x<mask>y", "a   <mask>   b", "<mask><mask>", "  <mask>", "\t\n<mask>",
  "[R]   after", "[R]\t\n x", "[R][R]  ", "a [R] <mask> b",
  "word words sword word_ word. a word", "word", "wordword", "\u00e9word", "word\u0301",
  "norm no normal enorm", "nor", "snorkel no", "<|im_start|>x <|im y<|im_end|>", "<|im<|im_end|>",
  "\t<mask>\t[R] <mask>", "a <w> b", "a<w> b", " <w>  <w> ", "<w><w>", "x <w>", "<w>",
];

(async () => {
  const out = { generator: "gen_hf_vectors.js", tokenizers: "0.23.2 (npm tokenizers, Rust core)" };

  const tok = load(base);
  const noAdded = load(Object.assign({}, base, { added_tokens: [] }));
  out.plain = [];
  for (const text of plainTexts) {
    out.plain.push({ text, ids: await ids(tok, text), ids_ordinary: await ids(noAdded, text) });
  }

  // A content that is already a vocabulary entry keeps that id; others
  // get new ids after the vocabulary, as the library assigns them.
  let next = Object.keys(base.model.vocab).length;
  const added = flagTokens.map(t => Object.assign({ id: t.content in base.model.vocab ? base.model.vocab[t.content] : next++ }, t));
  const flagTok = load(Object.assign({}, base, { added_tokens: base.added_tokens.concat(added) }));
  for (const a of added) {
    if (flagTok.tokenToId(a.content) !== a.id) throw new Error("id of " + a.content);
  }
  out.flags = { added_tokens: added, cases: [] };
  for (const text of flagTexts) {
    out.flags.cases.push({ text, ids: await ids(flagTok, text) });
  }

  // ignore_merges: a pre-token that is a vocabulary entry becomes that one
  // id without merging. The fixture's vocabulary is all rebuilt by its
  // merges, so the section adds entries that no merge produces.
  const extra = { "\u0120zzqx": 0, "qqqq": 0, "\u0120the": -1 };
  const vocab = Object.assign({}, base.model.vocab);
  let nv = Object.keys(vocab).length;
  for (const k of Object.keys(extra)) if (!(k in vocab)) vocab[k] = nv++;
  const imModel = Object.assign({}, base.model, { ignore_merges: true, vocab });
  const im = load(Object.assign({}, base, { model: imModel }));
  const mergedModel = Object.assign({}, base.model, { vocab });
  const merged = load(Object.assign({}, base, { model: mergedModel }));
  out.ignore_merges = { vocab_added: Object.fromEntries(Object.keys(extra).filter(k => !(k in base.model.vocab)).map(k => [k, vocab[k]])), cases: [] };
  for (const text of [" zzqx", "qqqq", " zzqxqqqq", "a zzqx qqqq the end", "zzqx", " the"]) {
    out.ignore_merges.cases.push({ text, ids: await ids(im, text), ids_merged: await ids(merged, text) });
  }
  process.stdout.write(JSON.stringify(out, null, 1) + "\n");
})();
