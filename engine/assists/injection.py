"""Instruction-like text where only data belongs: prompt injection, found by patterns and recorded.

Text reaches an expert's prompt from places the person did not write: knowledge-base passages (filled into a
slot's answer by a lookup), other experts' consult answers, and earlier slots' answers (quoted as references).
A sentence there that addresses the model ("ignore all previous instructions", a fake ``SYSTEM:`` turn, a
closing ``</reference>`` tag, "reveal your system prompt") is an attack on the harness, not a fact. The guard
flags such text in the task (recorded, not refused: the person may be asking about injection), and the assist
resolver never fills a placeholder with it.

The patterns are the families of the public attack catalogues: overrides of earlier instructions, role and
mode switches ("you are now DAN", "developer mode"), personas without safeguards ("an unfiltered and amoral
chatbot", "never break character"), text addressed to the AI, requests for the hidden prompt,
"new instructions:" blocks, fake chat-template and delimiter tokens, secrecy towards the user and exfiltration
of secrets. They look for text that speaks *to the model*; words like "ignore", "system" or "rm -rf" about a
document's own subject do not count. Measured on ``bench/data/injection_set.yaml`` by
``python -m bench.bench_injection``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Finding", "describe", "find_instructions", "quote_as_data"]

_F = re.IGNORECASE | re.MULTILINE

_QUALIFIER = r"(?:previous|prior|above|earlier|original|preceding|initial|former|all|any|every|your|its|my)"
_NOUN = (
    r"(?:instructions?|directions?|rules?|prompts?|guidelines?|guidance|polic(?:y|ies)|filters?|restrictions?|"
    r"directives?|commands?|context|task|question|orders?|programming|training)"
)
_VERB = (
    r"(?:ignore|disregard|forget|override|overrule|bypass|circumvent|supersedes?|overwrite|cancel|"
    r"do\s+not\s+follow|don'?t\s+follow|stop\s+following|no\s+longer\s+follow)"
)
_AI = r"(?:ai|a\.i\.|language\s+models?|llms?|ai\s+(?:assistants?|models?|systems?)|chatbots?|gpt|assistant)"

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "overrides earlier instructions",
        re.compile(rf"\b{_VERB}\b(?:\W+\w+){{0,3}}?\W+{_QUALIFIER}\b(?:\W+\w+){{0,2}}?\W+{_NOUN}\b", _F),
    ),
    (
        "overrides earlier instructions",
        re.compile(
            rf"\b{_VERB}\b(?:\W+\w+){{0,2}}?\W+{_NOUN}\W+(?:above|before|so\s+far|you\s+(?:were|have\s+been)\s+given)",
            _F,
        ),
    ),
    ("overrides earlier instructions", re.compile(r"\bforget\s+(?:everything|all)\s+(?:you|that|above)", _F)),
    (
        "overrides earlier instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget)\s+(?:the\s+rest\s+of\s+)?(?:(?:this|the|all|any|other|these|those)\s+)?"
            r"(?:data|info|information|content|text|documents?|input|snippets?|instructions|everything)\b[^.\n]{0,30}?"
            r"(?:\band|\bthen|,)\s+(?:just\s+|only\s+|instead\s+)?"
            r"(?:print|say|output|repeat|respond|reply|write|answer|translate|focus)\b",
            _F,
        ),
    ),
    (
        "overrides earlier instructions",
        re.compile(
            r"\b(?:ignor(?:ez|iere|ieren|a|e)|olvida|vergiss)\b(?:\W+\w+){0,3}?\W+"
            r"(?:instructions|anweisungen|instrucciones|istruzioni|consignes)",
            _F,
        ),
    ),
    (
        "declares earlier instructions void",
        re.compile(
            r"\b(?:previous|prior|above|earlier|original)\s+(?:guidance|instructions?|rules|prompt)\s+(?:is|are)\s+"
            r"(?:cancell?ed|void|revoked|obsolete|no\s+longer\s+valid)",
            _F,
        ),
    ),
    (
        "switches the model's role",
        re.compile(
            r"\b(?:from\s+now\s+on|henceforth|starting\s+now)\b,?\s+(?:you\b|act\b|respond\b|reply\b|answer\b|"
            r"behave\b|pretend\b|speak\b|only\b)",
            _F,
        ),
    ),
    ("switches the model's role", re.compile(r"\byou\s+are\s+now\s+(?:an?|my)\s+\w+", _F)),
    ("switches the model's role", re.compile(r"\bpretend\s+(?:you\s+are|you'?re|to\s+be)\b[^.\n]{0,40}\b" + _AI, _F)),
    (
        "switches the model to an unrestricted mode",
        re.compile(
            r"\b(?:you\s+are|you'?re|are\s+now|enter|entering|switch\s+to|enable|activate)\s+(?:now\s+)?(?:in\s+)?"
            r"(?:developer|god|jailbreak|dan|debug|admin|sudo|unrestricted|unfiltered)\s+mode\b",
            _F,
        ),
    ),
    (
        "switches the model to an unrestricted mode",
        re.compile(
            r"\b(?:do\s+anything\s+now|jailbreak|jailbroken|unrestricted\s+" + _AI + r"|no\s+longer\s+bound\s+by|"
            r"(?:safety|content)\s+(?:rules|filters|guidelines)\s+(?:no\s+longer|do\s+not|don'?t)\s+apply|"
            r"with\s+no\s+(?:guidelines|restrictions|rules|filters))\b",
            _F,
        ),
    ),
    (
        "removes the model's safeguards",
        re.compile(
            r"\b(?:unfiltered|uncensored|amoral|unethical|unrestricted|unbound)\s+(?:and\s+\w+\s+)?"
            r"(?:ai|a\.i\.|chatbot|assistant|language\s+model|llm|model|persona|version|character|bot)\b",
            _F,
        ),
    ),
    (
        "removes the model's safeguards",
        re.compile(
            r"\b(?:ai|chatbot|assistant|model|you|it|he|she)\b[^.\n]{0,40}?\b(?:no|without(?:\s+any)?|"
            r"doesn'?t\s+have\s+any|does\s+not\s+have\s+any|not\s+bound\s+by(?:\s+any)?)\s+(?:\w+\s+)?"
            r"(?:ethical|moral|safety|content)\s+(?:or\s+\w+\s+)?(?:guidelines|restrictions|filters|rules|limits|"
            r"boundaries|policies|principles)\b",
            _F,
        ),
    ),
    (
        "removes the model's safeguards",
        re.compile(
            r"\b(?:never|don'?t|do\s+not)\s+break\s+character\b|\bstay\s+in\s+character\b|"
            r"\b(?:ignores?|disregards?|bypass(?:es)?)\s+(?:all\s+)?(?:\w+,\s+)?(?:laws|morals|ethics|morality|"
            r"openai'?s?\s+(?:content\s+)?polic\w*)\b",
            _F,
        ),
    ),
    ("addresses the AI", re.compile(r"\bif\s+you\s+are\s+an?\s+" + _AI + r"\b", _F)),
    (
        "addresses the AI",
        re.compile(
            r"\b" + _AI + r"\W+(?:\w+\W+){0,2}?(?:processing|reading|summari[sz]ing|parsing|seeing)\s+this\b", _F
        ),
    ),
    (
        "addresses the AI",
        re.compile(r"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+)?" + _AI + r"\b", _F),
    ),
    ("addresses the AI", re.compile(r"\b(?:attention|hey|dear)\s*,?\s+(?:the\s+)?" + _AI + r"\b", _F)),
    (
        "addresses the AI",
        re.compile(
            r"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+|any\s+)?automated\s+(?:\w+\s+)?"
            r"(?:software|systems?|tools?|readers?|screening|agents?)\b|\binvisible\s+to\s+(?:humans|people|readers)\b",
            _F,
        ),
    ),
    ("addresses the AI", re.compile(r"^\W*(?:assistant|ai|model|chatbot)\s*,\s", _F)),
    (
        "addresses the AI",
        re.compile(
            r"\b(?:the|this|as\s+the)\s+" + _AI + r"\W+(?:must|should|shall|is\s+to|will\s+now|has\s+to|needs?\s+to|"
            r"ignore|now)\b",
            _F,
        ),
    ),
    (
        "asks for the hidden prompt",
        re.compile(
            r"\b(?:reveal|print|output|show|display|repeat|tell\s+me|what\s+is|what\s+are|give\s+me|disclose|leak)\b"
            r"[^.\n]{0,30}?\b(?:your|the|its)\s+(?:initial\s+|original\s+|hidden\s+|secret\s+|exact\s+|full\s+)?"
            r"(?:system\s+prompt|initial\s+prompt|prompt|instructions|configuration|hidden\s+instructions)\b",
            _F,
        ),
    ),
    ("asks for the hidden prompt", re.compile(r"\brepeat\s+(?:the\s+)?(?:words|text|everything)\s+above\b", _F)),
    ("asks for the hidden prompt", re.compile(r"\bsystem\s*prompt\b[^.\n]{0,20}\b(?:aus|afficher|mostrar)\b", _F)),
    (
        "gives new instructions",
        re.compile(
            r"\b(?:new|updated|real|actual|additional|hidden|secret)\s+(?:instructions?|task|goal|directive|orders?)"
            r"(?:\s+from\s+[^:\n]{1,40})?\s*:",
            _F,
        ),
    ),
    ("gives new instructions", re.compile(r"\bbegin\s+(?:new\s+)?instructions\b", _F)),
    ("gives new instructions", re.compile(r"\byour\s+new\s+(?:goal|task|instructions?|role|purpose|job)\s+is\b", _F)),
    ("gives new instructions", re.compile(r"\bthis\s+instruction\s+(?:supersedes|overrides|replaces)\b", _F)),
    (
        "imitates a chat template or a delimiter",
        re.compile(
            r"</?reference\b|<\|(?:im_start|im_end|system|user|assistant|endoftext|eot_id)\|>|\[/?INST\]|"
            r"</?system>|\[system\]\(|<<\s*SYS\s*>>",
            _F,
        ),
    ),
    (
        "imitates a chat template or a delimiter",
        re.compile(r"^\W*(?:system|assistant|human)(?:\s+(?:message|prompt|note|override|instructions?))?\s*:", _F),
    ),
    ("imitates a chat template or a delimiter", re.compile(r"^\s*#{1,6}\s*(?:system|instructions?)\s*:", _F)),
    (
        "hides itself from the user",
        re.compile(
            r"\b(?:do\s+not|don'?t|never|must\s+not)\s+(?:tell|inform|mention\s+(?:this\s+)?to)\s+the\s+user", _F
        ),
    ),
    (
        "exfiltrates data",
        re.compile(
            r"\b(?:send|post|upload|forward|leak|transmit)\b[^.\n]{0,50}?\bto\s+(?:https?://|[\w-]+\.[\w.-]*"
            r"(?:com|net|org|example|io|ru|xyz)\b)",
            _F,
        ),
    ),
)
"""(what the text does, pattern) pairs; the first match of each family is reported."""


@dataclass(frozen=True)
class Finding:
    """One instruction-like piece of text: what it does and the words that show it."""

    kind: str
    excerpt: str

    def __str__(self) -> str:
        return f'{self.kind} ("{self.excerpt}")'


def find_instructions(text: str) -> list[Finding]:
    """The instruction-like pieces of ``text``, one per kind, in the order of :data:`PATTERNS`."""
    found: dict[str, Finding] = {}
    for kind, pattern in PATTERNS:
        if kind in found:
            continue
        match = pattern.search(text)
        if match is not None:
            excerpt = " ".join(match.group(0).split())
            found[kind] = Finding(kind, excerpt if len(excerpt) <= 60 else excerpt[:57] + "...")
    return list(found.values())


def describe(findings: list[Finding], *, excerpts: bool = True) -> str:
    """One line naming what was found: ``overrides earlier instructions ("ignore all previous instructions")``.

    Without ``excerpts`` only the kinds: for text that goes into a document or a prompt (an unresolved marker's
    reason), which must not carry the attack's words along.
    """
    return "; ".join(str(f) if excerpts else f.kind for f in findings)


def quote_as_data(text: str) -> str:
    """``text`` with the reference delimiters it holds broken, so it cannot close the block it is quoted in."""
    return re.sub(r"<(/?reference\b)", r"&lt;\1", text, flags=re.IGNORECASE)
