#!/usr/bin/env python3
"""tok_corpus.py - the documents the tokenizer tests (#40) encode with dtrun and with Hugging Face:
hand-written edge cases, seeded random mixes of the characters the splitters treat differently,
this repository's prose and C code, invalid UTF-8 and (unless --small) a 1 MB document without
spaces. Written as records "LENGTH\\nBYTES\\n" (tests/unit/tok_tool.c, tests/cli/tok_ref.mjs).
usage: tok_corpus.py SRCDIR OUT [--small]"""
import glob
import os
import random
import sys

src, out = sys.argv[1], sys.argv[2]
small = '--small' in sys.argv
docs = []
edge = [
    "Hello world, 123  tabs\tand émojis 🙂",
    "", " ", "  ", "\n", "\r\n", "a", " a", "a ", "  a", "\t\tx", "tabs\tand", "x  \n\n y", "  \n\n x",
    "line1\nline2\r\nline3\rline4", "trailing spaces   ", "\n\n\n", " \n \n ", "\u00a0nbsp\u00a0 x", "a\u2028b\u2029c",
    "don't DON'T Don'T it's IT'S we'll WE'LL I'd I'D you're YOU'RE they've THEY'VE I'm I'M",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x ''s '\u017f \u017fs",
    "1234567 12 123 1234 0.5 3,141,592 ٣٤٥ ½ ⅷ 𝟙𝟚𝟛",
    "日本語のテキスト、中文文本。한국어 텍스트", "e\u0301 a\u0308 \u0915\u094d\u0937 n\u0303o",
    "🙂🙃👍🏽👨‍👩‍👧 🇫🇷 ❤️", "<|endoftext|> <|begin_of_text|> <s> </s> <unk> a<|endoftext|>b <|eot_id|>",
    "\u2581 lit\u2581eral \u2581\u2581 x", "Việt Nam tiếng Việt", "ǅungla ǈ ǋ", "\x00\x01\x1f\x7f",
    "!!! ??? ... --- ((())) {}[]<> @#$%^&*", " !x ?y .z", "'hello' \"quoted\"", "a\r\n\r\nb", "a \r\n b",
    "ⅰⅱⅲ", "\U0001f600\U0001f601", "\U00010400\U00010428", "मराठी हिन्दी", "Ελληνικά Русский עברית العربية",
    "x" * 300, " " * 50 + "x", "\t" * 20, "1" * 100, "!" * 80 + "\n" * 5,
    # the edges of \s, \p{L} and \p{N} (NEL and U+1680 are White_Space, U+180E and U+200B are not) and
    # case folding in Llama 3's contractions
    "a\u0085b", "x \u0085 y", "a\u180eb c", "a\u200bb", "\ufeffhi", "a\u001cb\u001dc\u001ed\u001ff", "q\u000bw\u000ce",
    "p \u2007 q\u202fr\u205fs", "\u1680x", "a\u00adb", "x\U0001F3FBy 1\u0663\u00b2\u2460 \u2160\u216b",
    "I\u0307 \u0130 K\u212a \u017ft \u2126", "'S 'LL '\u017f 'K", "don\u2019t",
]
docs += [s.encode() for s in edge]
docs += [b"\xff", b"a\xffb", b"\xc3", b"\xe2\x96", b"ok \xed\xa0\x80 surrogate", b"\xf0\x9f\x99", b"mix\xc3\xa9\xc3(\x80\x80)",
         b"\xf4\x90\x80\x80", b"\xc0\xaf overlong", b"end\xe2"]
rng = random.Random(40)
alphabet = list("aAzZ ' \t\n\r0123456789.,;!?-_()[]{}\"'sStTlLdDmMrReEvV") + \
    ["é", "ß", "ſ", "ǅ", "日", "本", "😀", "👍🏽", "\u00a0", "\u2028", "\u3000", "\u2581", "٣", "½", "\u0301", "ⅷ", "𝟙", "\U00010400"]
for n in range(200 if small else 800):
    k = rng.randint(1, 60)
    docs.append("".join(rng.choice(alphabet) for _ in range(k)).encode())
# this repository's prose and code, about 4 KB a document
files = sorted(glob.glob(os.path.join(src, "doc/*.md")) + [os.path.join(src, "README.md")] +
               glob.glob(os.path.join(src, "src/*/*.c")))
budget = 300_000 if small else 3_000_000
for f in files:
    data = open(f, "rb").read()
    for i in range(0, len(data), 4096):
        if budget <= 0:
            break
        docs.append(data[i:i + 4096])
        budget -= 4096
if not small:
    # one document of 1 MB without a space: one piece for the splitters, one word for SentencePiece
    big = "".join(rng.choice("abcdefghij日本é") for _ in range(700_000)).encode()[: 1 << 20]
    docs.append(big.decode("utf-8", "ignore").encode())  # 1 MiB, less the end of a cut character
with open(out, "wb") as o:
    for d in docs:
        o.write(b"%d\n" % len(d) + d + b"\n")
