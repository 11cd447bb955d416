"""Shared by tests/io/test_gguf_llama_cpp.py and test_tokenizer_json.py: the 100 texts both
tokenize, and GPT-2's byte <-> character map."""
import random


def texts():
    """100 texts: English, code, numbers, contractions, Unicode from several scripts and emoji,
    whitespace runs of every kind (leading, trailing, between words, newlines, tabs), and
    <|endoftext|> alone, inside text and repeated."""
    fixed = [
        "Hello, world!", "In the beginning God created the heaven and the earth.",
        "And God said, Let there be light: and there was light.", " leading space",
        "trailing space ", "two  spaces", "three   spaces here", "tab\there", "new\nline",
        "blank\n\nline", "\n\n\n", "   ", " ", "\t\t", "end with newline\n", "  \n  mixed \t\n",
        "I'm sure you're right, they've said it'll be done, we'd've known.", "don't DON'T Don't",
        "x = foo(bar, 3.14) + baz[2] * 1e-5;", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "numbers 1234567890 and 3.14159 and -42", "2026-12-07T22:19:39Z", "50257 tokens",
        "Café crème brûlée", "naïve façade coöperate", "Größe Straße Übermut", "日本語のテキスト",
        "中文文本，标点。", "Русский текст", "Ελληνικά γράμματα", "עברית", "العربية", "हिन्दी",
        "한국어 텍스트", "emoji 😀🎉👍🏽 and ❤️", "math ∑ ∫ √ ≠ ≤ ∞", "quotes “curly” ‘single’ «guillemets»",
        "dashes – — and ellipsis…", "<|endoftext|>", "text<|endoftext|>more text",
        "<|endoftext|><|endoftext|>", " <|endoftext|> ", "before\n<|endoftext|>\nafter",
        "<|endoftext", "endoftext|>", "<||>", "a", "", "!!!???...", "URL https://example.com/a?b=c&d=e",
        "email someone@example.org", "#hashtag @mention $100 %50 ^caret &amp;", "CamelCaseWords",
        "snake_case_words", "ALLCAPS SHOUTING", "mIxEd CaSe", "line one\r\nline two\r\n",
        "  indented\n    more indented\n", "word\u00a0nbsp", "zero\u200bwidth", "ﬁ ligature",
    ]
    rng = random.Random(39)
    words = ["the", "river", "bank", " money", "light", "and", "of", "said", "Lord", "unto",
             "é", "日本", "😀", "  ", "\n", "\t", "123", "x", "'s", "<|endoftext|>", ",", "."]
    while len(fixed) < 100:
        n = rng.randint(1, 12)
        fixed.append("".join(rng.choice(words) + rng.choice(["", " ", " ", "  "]) for _ in range(n)))
    return fixed[:100]


def byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: a token's spelling -> its bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}
