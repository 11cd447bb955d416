#!/usr/bin/python3
"""make_planted.py: a corpus with planted structure, for watching wte's geometry form.

Sentences come from a small grammar whose content words fall into six known classes (animal,
colour, number, place, food, verb). Every word of a class is used in exactly the same contexts
(each sentence slot picks its word uniformly from the slot's class), so the only thing that tells
two words of a class apart is their identity: a model that learns from contexts should give the
words of one class alike rows of wte.

Writes, into OUT (default datasets/planted/ beside this script):
  planted.txt          documents of 10 sentences on one line, separated by a blank line; every
                       document starts with a space so every word is " word" (one GPT-2 pre-token)
  labels.tsv           header "id<TAB>token<TAB>class", then one line per content word: its token
                       id, its token in GPT-2's encoder.json spelling ("Ġcat" for " cat"), its class
  tokenizer/           encoder.json + vocab.bpe in GPT-2's format, built so that every word is ONE
                       token: 256 byte tokens, then for each word the chain of merges
                       "Ġ c" -> "Ġc", "Ġc a" -> "Ġca", "Ġca t" -> "Ġcat" (shared prefixes once),
                       and "Ċ Ċ" for the blank line. Every merge's left part starts with "Ġ", so in
                       GPT-2's bpe() the only applicable pair of " cat" is always the leading one and
                       the word ends as one token.

Deterministic from --seed: the random numbers come from SplitMix64 (Steele, Lea & Flood 2014),
implemented here, so the output does not depend on Python's random module. Same seed and
--documents give byte-identical files.

Usage: datasets/make_planted.py [--seed N] [--documents N] [--out DIR]
Prints the vocabulary size (model.vocab_size must equal it; configs/planted.ini does) and the
sha256 of each file.
"""
import argparse
import hashlib
import json
import os
import sys

CLASSES = {
    "animal": ["cat", "dog", "horse", "cow", "sheep", "goat", "lion", "tiger", "bear", "wolf",
               "fox", "mouse"],
    "colour": ["red", "blue", "green", "yellow", "black", "white", "brown", "grey", "pink",
               "purple"],
    "number": ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve"],
    "place": ["river", "city", "forest", "garden", "village", "market", "mountain", "desert",
              "valley", "harbour"],
    "food": ["bread", "apple", "cheese", "honey", "fish", "rice", "soup", "cake", "corn", "milk"],
    "verb": ["sees", "eats", "finds", "likes", "takes", "wants", "carries", "follows", "chases",
             "watches"],
}
# Sentence templates: an UPPERCASE item is a slot filled uniformly from that class; other items
# are literal function words. Classes share some neighbours (food and animal both follow "the"
# and a colour) so that telling them apart needs more than one context.
TEMPLATES = [
    "the ANIMAL VERB the FOOD .",
    "NUMBER COLOUR ANIMAL live near the PLACE .",
    "the ANIMAL from the PLACE VERB NUMBER FOOD .",
    "a COLOUR ANIMAL is in the PLACE .",
    "we buy NUMBER COLOUR FOOD at the PLACE .",
]
SENTENCES_PER_DOCUMENT = 10


class SplitMix64:
    """SplitMix64 (Steele, Lea & Flood 2014; the seeding generator of xoshiro, as in include/wte/rng.h)."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n):
        """Uniform integer in [0, n): Lemire's multiply-shift, as wte::Rng::below."""
        return (self.next() * n) >> 64


def bytes_to_unicode():
    """GPT-2's encoder.py bytes_to_unicode(): byte -> printable character, in id order."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return bs, [chr(c) for c in cs]


def build_tokenizer():
    """Returns (encoder: token string -> id, merges: list of (left, right))."""
    order, chars = bytes_to_unicode()
    encoder = {}
    for i, c in enumerate(chars):  # ids 0..255 in bytes_to_unicode order, as GPT-2's file
        encoder[c] = i
    merges = []

    def add_merge(left, right):
        if left + right in encoder:
            return
        merges.append((left, right))
        encoder[left + right] = len(encoder)

    byte_char = dict(zip(order, chars))
    newline = byte_char[ord("\n")]
    space = byte_char[ord(" ")]
    add_merge(newline, newline)
    words = []
    for template in TEMPLATES:
        for item in template.split():
            if not item.isupper() and item not in words:
                words.append(item)
    for members in CLASSES.values():
        words.extend(members)
    for word in words:
        prefix = space
        for ch in word:
            add_merge(prefix, byte_char[ord(ch)])
            prefix += byte_char[ord(ch)]
    return encoder, merges, space


def generate_text(rng, documents):
    docs = []
    for _ in range(documents):
        words = []
        for _ in range(SENTENCES_PER_DOCUMENT):
            template = TEMPLATES[rng.below(len(TEMPLATES))]
            for item in template.split():
                if item.isupper():
                    members = CLASSES[item.lower()]
                    words.append(members[rng.below(len(members))])
                else:
                    words.append(item)
        docs.append("".join(" " + w for w in words))
    return "\n\n".join(docs) + "\n"


def write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return hashlib.sha256(data).hexdigest()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--documents", type=int, default=2000,
                        help="documents of 10 sentences (default 2000, about 190k tokens)")
    parser.add_argument("--out", default=os.path.join(here, "planted"),
                        help="output directory (default datasets/planted)")
    args = parser.parse_args()
    if args.seed < 0 or args.seed >= 2**64:
        sys.exit(f"make_planted.py: --seed {args.seed} is outside [0, 2^64)")
    if args.documents < 2:
        sys.exit(f"make_planted.py: --documents {args.documents} must be at least 2 "
                 "(one for training, one for validation)")

    encoder, merges, space = build_tokenizer()
    text = generate_text(SplitMix64(args.seed), args.documents)
    os.makedirs(os.path.join(args.out, "tokenizer"), exist_ok=True)
    sums = {}
    sums["planted.txt"] = write(os.path.join(args.out, "planted.txt"), text.encode("ascii"))
    labels = ["id\ttoken\tclass"]
    for cls, members in CLASSES.items():
        for w in members:
            labels.append(f"{encoder[space + w]}\t{space + w}\t{cls}")
    sums["labels.tsv"] = write(os.path.join(args.out, "labels.tsv"),
                               ("\n".join(labels) + "\n").encode("utf-8"))
    # Same spelling as Python's json.dumps in GPT-2's encoder.py (non-ASCII as \uXXXX).
    sums["tokenizer/encoder.json"] = write(os.path.join(args.out, "tokenizer", "encoder.json"),
                                           json.dumps(encoder).encode("ascii"))
    bpe = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)
    sums["tokenizer/vocab.bpe"] = write(os.path.join(args.out, "tokenizer", "vocab.bpe"),
                                        bpe.encode("utf-8"))
    n_words = sum(len(m) for m in CLASSES.values())
    print(f"planted corpus: {args.documents} documents, {len(text.split())} words, "
          f"{len(CLASSES)} classes, {n_words} labelled words; seed {args.seed}")
    print(f"vocab_size {len(encoder)} (256 bytes + {len(merges)} merges)")
    for name, digest in sums.items():
        print(f"  {os.path.join(args.out, name)}  sha256 {digest}")


if __name__ == "__main__":
    main()
