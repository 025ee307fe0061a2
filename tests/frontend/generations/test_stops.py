from __future__ import annotations

from frontend.generations.stops import StopMatcher


def feed_all(m: StopMatcher, chunks: list[str]) -> tuple[str, bool]:
    out = ""
    for c in chunks:
        r = m.feed(c)
        out += r.emit
        if r.stopped:
            return out, True
    return out + m.flush(), False


def test_no_stops_passes_text_through() -> None:
    assert feed_all(StopMatcher([]), ["a", "b"]) == ("ab", False)


def test_stop_inside_one_chunk() -> None:
    assert feed_all(StopMatcher(["END"]), ["hello END world"]) == ("hello ", True)


def test_stop_split_across_chunks_is_never_delivered() -> None:
    m = StopMatcher(["\n\n"])
    assert m.feed("Paris.").emit == "Paris."
    r = m.feed("\n")
    assert (r.emit, r.stopped) == ("", False)  # held back: might start the stop string
    r = m.feed("\nmore")
    assert (r.emit, r.stopped) == ("", True)


def test_held_text_is_released_when_it_is_not_a_stop() -> None:
    m = StopMatcher(["STOP"])
    assert m.feed("ST").emit == ""
    assert m.feed("ART").emit == "START"
    assert feed_all(StopMatcher(["STOP"]), ["a", "ST"]) == ("aST", False)


def test_earliest_of_several_stops_wins() -> None:
    assert feed_all(StopMatcher(["world", "lo"]), ["hello world"]) == ("hel", True)
