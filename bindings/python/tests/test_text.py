"""The pure-Python streaming helpers, with a fake detokenizer (no library)."""

import pytest

from moonlm._text import IncrementalDetokenizer, StopFilter, incomplete_utf8_tail

# A toy vocabulary: SentencePiece-like word pieces with a leading space that
# the detokenizer drops at the start of a text, BOS (renders as nothing) and
# byte tokens that together make multi-byte characters.
VOCAB = {
    1: b"",
    10: b" Once",
    11: b" upon",
    12: b" a",
    13: b" time",
    14: b",",
    20: "é".encode()[:1],
    21: "é".encode()[1:],
    22: "😀".encode()[:2],
    23: "😀".encode()[2:],
    24: b"\xff",
}


def fake_detok(tokens):
    out = b"".join(VOCAB[t] for t in tokens)
    body = [t for t in tokens if t != 1]
    if body and VOCAB[body[0]].startswith(b" ") and tokens[0] == 1:
        out = out[1:]  # the leading space after BOS is dropped
    return out


def stream(tokens, context=(1,)):
    d = IncrementalDetokenizer(fake_detok, list(context))
    pieces = [d.push(t) for t in tokens]
    pieces.append(d.flush())
    return pieces


def test_incomplete_utf8_tail():
    assert incomplete_utf8_tail(b"") == 0
    assert incomplete_utf8_tail(b"abc") == 0
    assert incomplete_utf8_tail("é".encode()) == 0
    assert incomplete_utf8_tail("é".encode()[:1]) == 1
    assert incomplete_utf8_tail("😀".encode()[:3]) == 3
    assert incomplete_utf8_tail("x😀".encode()) == 0
    assert incomplete_utf8_tail(b"\xff") == 0  # invalid, not incomplete


def test_pieces_join_to_the_whole_text():
    toks = [10, 11, 12, 13, 14, 20, 21, 12, 22, 23]
    pieces = stream(toks)
    assert "".join(pieces) == fake_detok([1] + toks).decode()
    assert pieces[0] == "Once"  # leading space dropped after BOS, as in the whole text
    assert pieces[1] == " upon"


def test_partial_characters_are_held_back():
    pieces = stream([10, 20, 21, 22, 23])
    assert pieces == ["Once", "", "é", "", "😀", ""]


def test_context_is_not_emitted():
    pieces = stream([13, 14], context=[1, 10, 11, 12])
    assert "".join(pieces) == " time,"


def test_unfinished_character_flushes_as_replacement():
    pieces = stream([10, 20])
    assert pieces == ["Once", "", "\ufffd"]
    assert stream([10, 24]) == ["Once", "\ufffd", ""]


def run_stop(stops, pieces):
    f = StopFilter(stops)
    out = []
    for p in pieces:
        out.append(f.push(p))
        if f.done:
            break
    out.append(f.push("", final=True))
    return out, f.done


@pytest.mark.parametrize(
    "pieces",
    [["Hello wor", "ld. END and more"], ["Hello world.", " E", "N", "D!"], ["Hello world. END"]],
)
def test_stop_split_across_pieces(pieces):
    out, done = run_stop(["END"], pieces)
    assert "".join(out) == "Hello world. "
    assert done


def test_stop_earliest_of_several_and_held_text_released():
    out, done = run_stop(["xyz", "bc"], ["a", "b", "c", "d"])
    assert "".join(out) == "a"
    assert done
    out, done = run_stop(["abcd"], ["ab", "c", "x"])
    assert out[:2] == ["", ""]  # held: could still become "abcd"
    assert "".join(out) == "abcx"
    assert not done


def test_no_stops_passes_through_and_final_releases_held():
    f = StopFilter(None)
    assert f.push("abc") == "abc"
    f = StopFilter("END")
    assert f.push("the EN") == "the "
    assert f.push("", final=True) == "EN"
    with pytest.raises(TypeError):
        StopFilter([1])
