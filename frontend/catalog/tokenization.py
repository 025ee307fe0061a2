"""A model version's pinned tokenizer and chat template, loaded from its verified artifact.

`prompt` input is tokenized as is (no template, no special tokens added). `messages` input is
rendered with the version's exact chat template (generation prompt appended), then tokenized.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jinja2
import jinja2.meta
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

ROLES = ("system", "user", "assistant", "tool")


class TemplateError(ValueError):
    """The chat template could not render these messages."""


@dataclass(slots=True, frozen=True)
class Message:
    role: str
    content: str


def _raise_exception(message: str) -> None:  # templates call raise_exception("...")
    raise TemplateError(message)


class ModelTokenizer:
    def __init__(self, tokenizer: Tokenizer, chat_template: str, eos_token_id: int) -> None:
        self._tokenizer = tokenizer
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        env.globals["raise_exception"] = _raise_exception
        self._template = env.from_string(chat_template)
        # a template renders tool definitions only if it reads a `tools` variable
        self.renders_tools = "tools" in jinja2.meta.find_undeclared_variables(env.parse(chat_template))
        self.eos_token_id = eos_token_id
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_artifact(cls, artifact_dir: Path, eos_token_id: int) -> ModelTokenizer:
        """The tokenizer and template of an artifact its caller verified (registry.load_version)."""
        return cls(
            Tokenizer.from_file(str(artifact_dir / "tokenizer.json")),
            (artifact_dir / "chat_template.jinja").read_text(),
            eos_token_id,
        )

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def render_chat(self, messages: Sequence[Message]) -> str:
        try:
            return self._template.render(
                messages=[{"role": m.role, "content": m.content} for m in messages],
                add_generation_prompt=True,
            )
        except jinja2.TemplateError as e:
            raise TemplateError(f"chat template failed: {e}") from e

    def encode_chat(self, messages: Sequence[Message]) -> list[int]:
        return self.encode(self.render_chat(messages))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=True))

    def detokenizer(self) -> Detokenizer:
        return Detokenizer(self._tokenizer)

    def token_bytes(self, token_id: int) -> bytes:
        """One token's bytes (a byte-level BPE piece may hold part of a UTF-8 character)."""
        piece = self._tokenizer.id_to_token(token_id)
        if piece is None:
            return b""
        decoder = _byte_decoder()
        if all(c in decoder for c in piece):
            return bytes(decoder[c] for c in piece)
        return str(piece).encode()  # an added token, spelled as itself


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE's printable stand-ins for the 256 byte values, reversed (GPT-2's table)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    stand_ins = {b: chr(b) for b in printable}
    extra = (b for b in range(256) if b not in stand_ins)
    stand_ins |= {b: chr(256 + n) for n, b in enumerate(extra)}
    return {c: b for b, c in stand_ins.items()}


class Detokenizer:
    """Incremental detokenization: text for each new token, never splitting a UTF-8 character.

    A token that ends inside a multi-byte character yields "" until the character completes.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._stream = DecodeStream(skip_special_tokens=True)

    def step(self, token_id: int) -> str:
        return self._stream.step(self._tokenizer, token_id) or ""
