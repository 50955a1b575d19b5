"""Query keywords: stop-word sets and OpenClaw's keyword extraction. The JavaScript string semantics these rules
are stated in live in :mod:`retrievers.text`.

Query transform registered here (``retrievers.candidates.arms.query_transform``):

* ``openclaw_keywords`` — OpenClaw 2026.2.26 ``extractKeywords`` (PIPELINES.md §A.9, Appendix A and D). Each
  keyword becomes one variant arm ``fts#i`` (FTS-only mode runs the keyword arm once per keyword).
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from retrievers.candidates.arms import query_transform
from retrievers.text import JS_WS, js_trim
from retrievers.types import Query


def _words(s: str) -> frozenset[str]:
    return frozenset(s.split())


STOP_EN = _words("""a an the this that these those i me my we our you your he she it they them is are was were be
been being have has had do does did will would could should can may might in on at to for of with by from about into
through during before after above below between under over and or but if then because as while when where what
which who how why yesterday today tomorrow earlier later recently ago just now thing things stuff something anything
everything nothing please help find show get tell give""")
STOP_ES = _words("""el la los las un una unos unas este esta ese esa yo me mi nosotros nosotras tu tus usted ustedes
ellos ellas de del a en con por para sobre entre y o pero si porque como es son fue fueron ser estar haber tener
hacer ayer hoy mañana antes despues después ahora recientemente que qué cómo cuando cuándo donde dónde porqué favor
ayuda""")
STOP_PT = _words("""o a os as um uma uns umas este esta esse essa eu me meu minha nos nós você vocês ele ela eles elas
de do da em com por para sobre entre e ou mas se porque como é são foi foram ser estar ter fazer ontem hoje amanhã
antes depois agora recentemente que quê quando onde porquê favor ajuda""")
# «من فضلك» is one entry containing a space: it can never equal a token (kept for fidelity).
STOP_AR = _words("""ال و أو لكن ثم بل أنا نحن هو هي هم هذا هذه ذلك تلك هنا هناك من إلى الى في على عن مع بين ل ب ك
كان كانت يكون تكون صار أصبح يمكن ممكن بالأمس امس اليوم غدا الآن قبل بعد مؤخرا لماذا كيف ماذا متى أين هل فضلا
ساعد""") | {"من فضلك"}
STOP_KO = _words("""은 는 이 가 을 를 의 에 에서 로 으로 와 과 도 만 까지 부터 한테 에게 께 처럼 같이 보다 마다 밖에 대로
나 나는 내가 나를 너 우리 저 저희 그 그녀 그들 이것 저것 그것 여기 저기 거기 있다 없다 하다 되다 이다 아니다 주다 오다 가다
것 거 등 수 때 곳 중 분 잘 더 또 매우 정말 아주 많이 너무 좀 그리고 하지만 그래서 그런데 그러나 또는 그러면 왜 어떻게 뭐
언제 어디 누구 무엇 어떤 어제 오늘 내일 최근 지금 아까 나중 전에 제발 부탁""")
STOP_JA = _words("""これ それ あれ この その あの ここ そこ あそこ する した して です ます いる ある なる できる の こと もの
ため そして しかし また でも から まで より だけ なぜ どう 何 いつ どこ 誰 どれ 昨日 今日 明日 最近 今 さっき 前 後""")
STOP_ZH = _words("""我 我们 你 你们 他 她 它 他们 这 那 这个 那个 这些 那些 的 了 着 过 得 地 吗 呢 吧 啊 呀 嘛 啦 是 有 在
被 把 给 让 用 到 去 来 做 说 看 找 想 要 能 会 可以 和 与 或 但 但是 因为 所以 如果 虽然 而 也 都 就 还 又 再 才 只 之前 以前
之后 以后 刚才 现在 昨天 今天 明天 最近 东西 事情 事 什么 哪个 哪些 怎么 为什么 多少 请 帮 帮忙 告诉""")
STOP_SETS = {"en": STOP_EN, "es": STOP_ES, "pt": STOP_PT, "ar": STOP_AR, "ko": STOP_KO, "ja": STOP_JA,
             "zh": STOP_ZH}
_ALL_STOP = frozenset().union(*STOP_SETS.values())
#: Korean trailing particles, longest first (equal lengths keep this order)
KO_PARTICLES = tuple("에서 으로 에게 한테 처럼 같이 보다 까지 부터 마다 밖에 대로 은 는 이 가 을 를 의 에 로 와 과 도 만".split())

_KANA = re.compile(r"[\u3040-\u30ff]")
_IDEO = re.compile(r"[\u4e00-\u9fff]")
_HANGUL = re.compile(r"[\uac00-\ud7af\u3131-\u3163]")
_HANGUL_SYLLABLE = re.compile(r"[\uac00-\ud7af]")
_JA_PARTS = re.compile(r"[a-z0-9_]+|[\u30a0-\u30ff\u30fc]+|[\u4e00-\u9fff]+|[\u3040-\u309f]{2,}")
_KANJI_RUN = re.compile(r"[\u4e00-\u9fff]+")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")
_ASCII_LETTERS = re.compile(r"[a-zA-Z]+")
_ASCII_DIGITS = re.compile(r"[0-9]+")


def _is_separator(ch: str) -> bool:
    """``[\\s\\p{P}]`` in JS unicode mode: JS whitespace (incl. U+FEFF) or any punctuation category (incl. ``_``)."""
    return ch in JS_WS or unicodedata.category(ch)[0] == "P"


def _segments(text: str) -> list[str]:
    out, cur = [], []
    for ch in text:
        if _is_separator(ch):
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _strip_korean_particle(token: str) -> str | None:
    for p in KO_PARTICLES:
        if len(token) > len(p) and token.endswith(p):
            return token[: -len(p)]
    return None


def _useful_korean_stem(stem: str) -> bool:
    if _HANGUL_SYLLABLE.search(stem):
        return len(stem) >= 2
    return _ASCII_WORD.fullmatch(stem) is not None


def _bigrams(chars: str | list[str]) -> list[str]:
    return [chars[i] + chars[i + 1] for i in range(len(chars) - 1)]


def openclaw_tokenize(query: str) -> list[str]:
    """OpenClaw's query tokeniser (before stop-word/validity filtering), in emission order."""
    tokens: list[str] = []
    for seg in _segments(js_trim(query.lower())):
        if _KANA.search(seg):  # Japanese
            for part in _JA_PARTS.findall(seg):
                if _KANJI_RUN.fullmatch(part):
                    tokens.append(part)
                    tokens.extend(_bigrams(part))
                else:
                    tokens.append(part)
        elif _IDEO.search(seg):  # Chinese: unigrams, then adjacent bigrams of the ideograph sequence
            chars = [c for c in seg if _IDEO.match(c)]
            tokens.extend(chars)
            tokens.extend(_bigrams(chars))
        elif _HANGUL.search(seg):  # Korean: strip one trailing particle
            stem = _strip_korean_particle(seg)
            stem_is_stop = stem is not None and stem in STOP_KO
            if seg not in STOP_KO and not stem_is_stop:
                tokens.append(seg)
            if stem and stem not in STOP_KO and _useful_korean_stem(stem):
                tokens.append(stem)
        else:
            tokens.append(seg)
    return tokens


def _valid_keyword(tok: str) -> bool:
    if not tok:
        return False
    if _ASCII_LETTERS.fullmatch(tok) and len(tok) < 3:
        return False
    if _ASCII_DIGITS.fullmatch(tok):  # ASCII digits only (full-width / Arabic-Indic digit strings are kept)
        return False
    if all(unicodedata.category(c)[0] in "PS" for c in tok):
        return False
    return True


@lru_cache(maxsize=65536)
def _extract(query: str) -> tuple[str, ...]:
    seen: set[str] = set()
    out: list[str] = []
    for tok in openclaw_tokenize(query):
        if tok in _ALL_STOP or not _valid_keyword(tok) or tok in seen:
            continue
        seen.add(tok)
        out.append(tok)
    return tuple(out)


def extract_keywords(query: str) -> list[str]:
    """OpenClaw 2026.2.26 ``extractKeywords`` (§A.9).

    Lower-case + trim, split on runs of JS whitespace or Unicode punctuation; per segment: Japanese (kana
    present: ASCII words, katakana runs, kanji runs + their bigrams, hiragana runs ≥ 2), Chinese (ideograph
    unigrams then bigrams), Korean (trailing particle stripped, stem emitted when useful), else the segment.
    Then drop tokens in any of the 7 stop-word sets, invalid tokens (ASCII letters < 3, ASCII digits, pure
    punctuation/symbols) and duplicates (first kept). Example: ``that thing we discussed about the API`` →
    ``["discussed", "api"]``.
    """
    return list(_extract(query))


@query_transform("openclaw_keywords")
def openclaw_keywords(q: Query) -> list[str]:
    """OpenClaw FTS-only mode (§A.9): one FTS pass per keyword; no keywords → the trimmed query itself;
    an empty / whitespace query → no search at all (§A.2 step 1)."""
    text = js_trim(q.text)
    if not text:
        return []
    return extract_keywords(text) or [text]


__all__ = ["extract_keywords", "openclaw_tokenize", "openclaw_keywords", "STOP_SETS", "KO_PARTICLES"]
