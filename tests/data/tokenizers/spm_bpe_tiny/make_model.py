"""Makes tokenizer.model, a 512-piece BPE SentencePiece model trained on this repository's docs
(byte fallback, one user-defined and two control pieces, identity normalization as Llama and
Mistral use), and expected.json, each piece as sentencepiece itself reads it: [piece, score,
kind]. Run once, by hand (python3 make_model.py, sentencepiece 0.1.97); CI does not run it.
"""
import glob, json, os, pathlib, tempfile

import sentencepiece

here = pathlib.Path(__file__).resolve().parent
docs = sorted(glob.glob(str(here.parents[3] / "docs" / "*.md")))
with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as out:
        for doc in docs:
            out.write(pathlib.Path(doc).read_text(encoding="utf-8"))
    sentencepiece.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(tmp, "m"), vocab_size=512, model_type="bpe", byte_fallback=True,
        user_defined_symbols=["<user>"], control_symbols=["[INST]", "[/INST]"], unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=True,
        allow_whitespace_only_pieces=True, minloglevel=2)
    model = pathlib.Path(tmp, "m.model").read_bytes()
(here / "tokenizer.model").write_bytes(model)
sp = sentencepiece.SentencePieceProcessor(model_proto=model)
kind = lambda i: ("unknown" if sp.IsUnknown(i) else "control" if sp.IsControl(i) else "unused" if sp.IsUnused(i)
                  else "byte" if sp.IsByte(i) else "normal")  # user-defined pieces read as normal
pieces = [[sp.IdToPiece(i), sp.GetScore(i), kind(i)] for i in range(sp.vocab_size())]
rows = ",\n".join(json.dumps(p, ensure_ascii=False) for p in pieces)
(here / "expected.json").write_text(f'{{"generator": "sentencepiece {sentencepiece.__version__}", "pieces": [\n{rows}\n]}}\n',
                                    encoding="utf-8")
