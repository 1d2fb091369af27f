"""Vocabulary and surface forms of the synthetic closure suite: invented names, sounds, objects, phrasings.

Everything here is data plus small pure helpers that draw from a caller's `random.Random`, so the suite
stays deterministic for a seed. Used by `omnidecision.tasks.synth`:

    >>> import random
    >>> names = Names(random.Random(0))
    >>> len(names.person().split())
    2
"""

from __future__ import annotations

import random

SYLLABLES: tuple[str, ...] = (
    "ka", "lo", "mi", "ren", "tar", "vo", "sel", "dun", "ira", "bel", "cor", "fen", "gal", "hu", "jor", "kel",
    "mar", "nov", "or", "pel", "quin", "ras", "sol", "tev", "ul", "vin", "wen", "yar", "zed", "ath", "bri",
    "dra", "esk", "fal", "gor", "hal", "ist", "lum", "mor", "nal", "osk", "pra", "rul", "sav", "tam", "ux",
)
PLACE_SUFFIXES: tuple[str, ...] = ("", "", "ton", "vik", "grad", "holm", "mouth", "ford", "burg", "stad")
ORG_KINDS: tuple[str, ...] = ("Institute", "Works", "Collective", "Foundry", "Society", "Guild", "Laboratories",
                              "Trading Company", "Orchestra", "Press")

# Sounds: no word is shared between two labels, so keyword search can tell them apart.
SOUNDS: tuple[str, ...] = (
    "glass shattering", "church bell", "dog barking", "thunder rumble", "train whistle", "door slam",
    "crowd cheering", "phone ringing", "car horn", "gong strike", "rooster crowing", "drum roll",
    "siren wailing", "typewriter clacking", "owl hooting", "kettle boiling", "harp glissando", "baby crying",
    "cash register", "fireworks popping",
)
COLORS: tuple[str, ...] = ("red", "blue", "green", "yellow", "purple", "orange", "white", "black", "silver", "brown")
OBJECTS: tuple[str, ...] = ("umbrella", "bicycle", "lantern", "kite", "van", "piano", "suitcase", "tent", "statue",
                            "tractor", "canoe", "wagon", "mailbox", "scooter")

# Filler lines that carry none of the chain's keywords.
FILLER_SPEECH: tuple[str, ...] = (
    "Let us take a short break before the next part.", "The weather has been kind to us this evening.",
    "Thank you all for coming out tonight.", "We will be back in just a moment.",
    "Please keep your tickets with you at all times.", "The lights will dim shortly.",
    "That was quite something, was it not?", "Remember to silence your devices.",
    "Our sponsors made this evening possible.", "Stay tuned for more after this.",
    "The crew is setting up the stage now.", "Refreshments are available in the hall.",
    "Some of you have travelled a long way.", "It is a pleasure to be here again.",
)
FILLER_FRAMES: tuple[str, ...] = (
    "A wide shot of the audience in the hall.", "The camera pans across an empty stage.",
    "Close-up of hands clapping.", "Stage lights flicker in the dark.", "A slow zoom on the curtain.",
    "People walk through a crowded corridor.", "The host adjusts a microphone.",
)

# --- evidence surface forms (keywords the queries rely on are fixed; the rest varies) -------------------------------

# audio hop: the transcript cue at the sound; keywords: the sound's words + "name".
AUDIO_CUES: tuple[str, ...] = (
    "Right after the {sound}, the narrator says the name {x}.",
    "({sound}) Narrator: the name to remember is {x}.",
    "Just as the {sound} fades, a voice gives the name {x}.",
    "After that {sound} you can hear the name {x} spoken clearly.",
)
AUDIO_FOCUS = "{sound} name"
AUDIO_DESC: tuple[str, ...] = (
    "the name spoken right after the {sound}",
    "the name the narrator gives just after the {sound}",
    "the name heard following the {sound}",
)

# subtitle hop: keywords: the anchor word + "guest".
SUB_CUES: tuple[str, ...] = (
    "{x} introduces our guest, {p}.",
    "Please welcome our guest {p}, introduced by {x}.",
    "{x}: our guest today is {p}.",
    "And here, brought along by {x}, is our guest {p}.",
)
SUB_FOCUS = "{anchor} guest"
SUB_DESC: tuple[str, ...] = (
    "the guest introduced by {ref}",
    "the guest whom {ref} introduces",
    "the person presented as the guest of {ref}",
)

# clip/frame hop: keywords: color + object + "sign".
FRAME_CUES: tuple[str, ...] = (
    "A {color} {obj} with a sign reading {w}.",
    "Someone wheels a {color} {obj} past; its sign says {w}.",
    "A sign on the {color} {obj} reads {w}.",
)
FRAME_FOCUS = "{color} {obj} sign"
FRAME_DESC: tuple[str, ...] = (
    "the word on the sign of the {color} {obj}",
    "what the sign on the {color} {obj} says",
    "the name written on the {color} {obj}'s sign",
)
SUPP_FRAME_CUE = "In the background stands a {color} {obj}."
SUPP_FOCUS = "background {obj}"

# web facts. kind: person / org. A fact has keywords (in the page and in the focus), page phrasings, questions.
NUM_FACTS: dict[str, list[dict]] = {
    "person": [
        {"key": "born year", "np": "the birth year of {ref}", "lo": 1920, "hi": 2004,
         "page": ("{e} was born in the year {v}.", "Born in {v}, {e} grew up by the sea."),
         "q": ("In what year was {ref} born?", "What is the birth year of {ref}?", "{ref} was born in which year?")},
        {"key": "albums released", "np": "the number of albums released by {ref}", "lo": 2, "hi": 48,
         "page": ("{e} has released {v} albums so far.", "Over the years {e} released {v} albums."),
         "q": ("How many albums has {ref} released?", "What number of albums did {ref} release?")},
        {"key": "awards won", "np": "the number of awards won by {ref}", "lo": 1, "hi": 35,
         "page": ("{e} has won {v} awards.", "In total {e} won {v} awards."),
         "q": ("How many awards has {ref} won?", "What is the number of awards won by {ref}?")},
    ],
    "org": [
        {"key": "founded year", "np": "the founding year of {ref}", "lo": 1850, "hi": 2015,
         "page": ("{e} was founded in {v}.", "Founded in {v}, {e} started small."),
         "q": ("In which year was {ref} founded?", "What is the founding year of {ref}?")},
        {"key": "employees staff", "np": "the number of employees of {ref}", "lo": 12, "hi": 950,
         "page": ("{e} employs {v} staff members.", "The staff of {e} counts {v} employees."),
         "q": ("How many employees does {ref} have?", "What is the staff count of {ref}?")},
    ],
}
TEXT_FACTS: dict[str, list[dict]] = {
    "person": [
        {"key": "hometown", "page": ("{e} calls {v} the hometown.", "The hometown of {e} is {v}."),
         "q": ("What is the hometown of {ref}?", "Which town is the hometown of {ref}?")},
    ],
    "org": [
        {"key": "headquarters city",
         "page": ("{e} has its headquarters in the city of {v}.", "The headquarters of {e} are in {v}."),
         "q": ("In which city are the headquarters of {ref}?", "Where is {ref} headquartered?")},
    ],
}
CONFLICT_PAGE: tuple[str, ...] = (
    "Forum post: I am fairly sure of this. {fact} But I may be wrong.",
    "Fan wiki (unverified): {fact}",
    "Rumour column: {fact} Nobody has confirmed it.",
)
REGISTRY_PAGE = "Official registry record: {fact}"
# a conflict settled in the video: the plaque repeats the fact's keywords so a frame query on them finds it
PLAQUE_FRAME = "A plaque on the wall reads ({key}): {fact}"
REGISTRY_KEY = "official registry record"

COMPUTATIONS: tuple[dict, ...] = (
    {"code": "print(abs({a} - {b}))", "expr": "abs(n{a} - n{b})",
     "q": ("What is the absolute difference between {A} and {B}?", "How far apart are {A} and {B}?"), "const": True},
    {"code": "print({a} + {b})", "expr": "n{a} + n{b}",
     "q": ("What is {A} plus {B}?", "Add {A} and {B}: what is the total?"), "const": True},
    {"code": "print(max({a}, {b}))", "expr": "max(n{a}, n{b})",
     "q": ("Which is larger, {A} or {B}? Give the number.", "What is the greater of {A} and {B}?"), "const": False},
)


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


class Names:
    """Invented, globally unique names (persons, places, words, organisations) drawn from `rng`."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()  # membership only: never iterated, so output does not depend on its order

    def _word(self, lo: int = 2, hi: int = 3) -> str:
        return cap("".join(self.rng.choice(SYLLABLES) for _ in range(self.rng.randint(lo, hi))))

    def _unique(self, make) -> str:
        for _ in range(1000):
            s = make()
            if s.lower() not in self.used:
                self.used.add(s.lower())
                return s
        raise RuntimeError("name space exhausted")  # pragma: no cover

    def word(self) -> str:
        return self._unique(lambda: self._word(2, 3))

    def person(self) -> str:
        return self._unique(lambda: f"{self._word(2, 2)} {self._word(2, 3)}")

    def place(self) -> str:
        return self._unique(lambda: self._word(2, 2) + self.rng.choice(PLACE_SUFFIXES))

    def org(self) -> str:
        return self._unique(lambda: f"{self._word(2, 3)} {self.rng.choice(ORG_KINDS)}")

    def near(self, name: str, word: int = -1) -> str:
        """A confusable variant of `name`: one word (the last by default) with one letter changed (a distractor)."""
        parts = name.split(" ")
        for _ in range(100):
            target = parts[word]
            i = self.rng.randrange(1, len(target))
            variant = target[:i] + self.rng.choice("aeiouyrnlst") + target[i + 1:]
            full = " ".join(parts[:word % len(parts)] + [variant] + parts[word % len(parts) + 1:])
            if variant != target and full.lower() not in self.used:
                self.used.add(full.lower())
                return full
        return self.word()  # pragma: no cover
