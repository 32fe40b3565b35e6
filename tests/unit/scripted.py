"""A scripted backend for a slot's work: draw n is answered with the n-th text of its script."""

from __future__ import annotations

from dataclasses import dataclass, field

from experts.backends import Generation, GenerationRequest


@dataclass
class Scripted:
    """A backend that answers draw n with ``texts[n]`` (the last repeats) and records every request."""

    texts: list[str]
    requests: list[GenerationRequest] = field(default_factory=list)

    def supports_grammar(self) -> bool:
        return False

    def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        text = self.texts[min(len(self.requests), len(self.texts)) - 1]
        return Generation(text=text, prompt_tokens=100, completion_tokens=len(text) // 4, finish_reason="stop")
