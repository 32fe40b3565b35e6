"""The aspects of a task: the deliverables it names, found by a deterministic pass over its clauses.

"Secure a FastAPI backend: add authentication, rate limiting and input validation, and document the changes"
names four: *add authentication*, *add rate limiting*, *add input validation*, *document the changes*. Plans
are checked against them (every aspect covered by a slot, every slot serving the task), and a multi-part task
that no template fits is planned from them, one slot per aspect.

The pass reads only instructions: a sentence counts when it starts with an imperative verb (after "please",
"can you", "I need you to" and the like) or asks for something ("I need a ..."). Within an instruction it
splits coordinated parts (commas, "and", "then", semicolons): a part that starts with a verb is a new aspect,
a part that does not is another object of the verb before it ("add X, Y and Z"), unless that verb takes its
objects together ("compare X and Y") or a relative clause has begun ("a function that parses dates and
returns ..."); "and explain why" (how it works, each line, ...) explains the part before it. Sentences that
only give context ("Our report query takes 3 minutes.") name no aspect. A task in which no instruction is found
is one aspect, the whole task.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass

__all__ = [
    "Aspect",
    "asks_for_work",
    "aspect_title",
    "deliverable_noun",
    "headline_deliverable",
    "named_deliverables",
    "named_functions",
    "task_aspects",
]

MAX_ASPECTS = 8
"""More than this and the task is a list of requirements, not of deliverables: it is kept as one aspect."""

VERBS = frozenset(
    """
    add adapt advise analyse analyze answer apply argue assess audit automate benchmark brainstorm build calculate
    check choose clean collect come compare compile compose compute configure containerise containerize convert
    correct create debug decide define delete deliver deploy derive describe design detect develop diagnose
    document draft draw edit encrypt estimate evaluate explain export extend extract fetch find fix forecast
    format generate give harden help
    identify implement improve include install integrate interpret investigate justify label list load
    make map measure merge migrate model monitor name normalise normalize optimise optimize outline parse plan
    predict prepare present prioritise project prioritize produce profile propose protect prove provide publish
    put rank reconstruct recommend reconcile reduce refactor remove rename reply report research resolve
    restructure review revise rewrite run threat-model do
    schedule score scrape secure select send set show simplify sketch solve sort specify split state store
    structure suggest
    summarise summarize support test train transform translate troubleshoot tune update upgrade validate verify
    visualise visualize walk work write
    """.split()
)
"""Imperative verbs that start an instruction (base forms only: "returns" in a relative clause is not one).
"come" and "put" stand for "come up with" and "put together"."""

JOINT_VERBS = frozenset(
    "compare contrast reconcile merge combine choose weigh match integrate connect link map convert migrate "
    "translate select decide walk discuss cover explain".split()
)
"""Verbs whose coordinated objects are one piece of work: "compare PostgreSQL and MySQL" is one aspect."""

MAKING_VERBS = frozenset(
    "write draft create build make produce prepare compose design generate add give provide outline sketch "
    "document summarise summarize list propose".split()
)
"""Verbs that make a deliverable: after an infinitive series, "and write a report" is a second piece of work,
where "and run the tests" is one more step of the first."""

WORK_VERBS = frozenset(
    """
    audit build code compose configure containerise containerize create design develop draft generate implement
    migrate produce refactor review rewrite threat-model write
    """.split()
)
"""Verbs of a request for work (a part of the document), not for a fact: an expert assist that starts with one
("write the query that ...", "review the flow for threats") is work for a part of its own (``nodes.complete``)."""

COMPOSITE_NOUNS = frozenset("plan suite pipeline workflow workflows lesson lessons".split())
"""Deliverable nouns whose listed parts after a colon are deliverables of their own ("the plan: how the schemas
map, the scripts that move the data, and the steps"), where a file's, a letter's or a leaflet's are its content."""

RESULT_VERBS = frozenset("give state report show quote include".split())
"""Verbs that hand over a result of the work before them ("test whether it changed and give the 95% interval"):
one piece of work unless their object is a deliverable of its own ("and give a summary for the board")."""

COMPUTE_VERBS = frozenset("calculate compute work estimate determine find solve".split())
"""Verbs whose coordinated figures are one calculation: "work out LTV, LTV:CAC and CAC payback" is one aspect (a
deliverable noun among them is still its own: "compute the totals and a report")."""

TITLE_VERBS = frozenset("write draft create build produce compose generate deliver".split())
"""Verbs whose object is the deliverable itself: a slot for "write a blameless postmortem" is titled by the
postmortem, where "document the changes" or "summarise the findings" need their verb to say what the part is
("give the team ...", "make the page faster": not every making verb's object is what it makes)."""

BINOMIALS = (
    "terms and conditions",
    "pros and cons",
    "profit and loss",
    "research and development",
    "questions and answers",
    "question and answer",
    "trial and error",
    "drag and drop",
    "search and replace",
    "read and write",
    "input and output",
    "strengths and weaknesses",
    "dos and don'ts",
    "rules and regulations",
    "sales and marketing",
    "health and safety",
    "mergers and acquisitions",
    "supply and demand",
    "black and white",
)
"""Fixed pairs joined by "and" that name one thing; they are never split."""

_LEAD = re.compile(
    r"^(?:(?:please|kindly|also|now|finally|first|next|lastly|then|and|separately|after that|afterwards|additionally"
    r"|in addition|on top of that)\s*,?\s+"
    r"|(?:can|could|would|will) you(?: please)?\s+"
    r"|(?:i|we) (?:need|want|would like|'d like) (?:you )?to\s+"
    r"|help (?:me|us)(?: to)?\s+"
    r"|i'd like you to\s+"
    r"|your (?:job|task) is to\s+)+",
    re.I,
)
_OWN_GOAL = re.compile(r"^(?:i|we) (?:need|want|would like|'d like|plan|are planning|intend) to\s+(?!.*\byou\b)", re.I)
"""A sentence that says what the person means to do ("We want to split ..."), not what they ask for."""
_SUBJECT = re.compile(r"^(?:it|they|we|he|she|this|these|which|there)\s+\w+", re.I)
"""A clause with its own subject ("it adds shared lists"): the material of a deliverable, not a list of them."""
_SEE = re.compile(r"^(?:i|we)(?: would| ?'d) (?:like|love) to (?:see|know) (?=what|how|whether|which)", re.I)
"""A request to be shown a result ("I'd like to see what the rent would be ..."): an instruction to show it."""
_QUESTION_DO = re.compile(r"^do(?:es)?\s+(?:i|we|you|they|it|he|she|this|these|that|my|our)\b", re.I)
"""A question ("Do I need ...?"), not the verb of an instruction ("do a security review")."""
_LABEL = re.compile(r"^[A-Z][a-z]+$")
"""One capitalised word before a colon ("Format:", "Context:", "Note:"): a label of what follows."""
_ASIDE = re.compile(r"^\([^()\n]*\)\s*")
"""A bracketed aside before the request of a sentence."""
_ENUMERATOR = re.compile(r"^\(?(?:[a-h]|[1-9])\)\s+", re.I)
"""An inline enumerator before a listed request: "(1) do a review ..., (2) rewrite it ...", "(a) a query"."""
_CONSTRAINT = re.compile(
    r"^(?:make sure|be sure|ensure|remember to|don't forget to|do not forget to|note that|keep in mind)\b", re.I
)
"""A sentence that sets a condition on the deliverable ("Make sure it mentions: ..."), not a deliverable."""
_TOPIC = re.compile(r"^(?:what|how|when|where|why|which|who|whether)\b", re.I)
"""A listed part that is a question the deliverable answers ("what to eat, how to take the prep"): its content."""
_CLAUSE = re.compile(
    r"^(?:(?:the|a|an|our|my|your|their|its|each|every|no)\s+)?[\w'-]+(?:\s+[\w'-]+){0,2}\s+"
    r"(?:is|are|was|were|has|have|had|can|could|will|would|should|must|may|might|does|do|did|stays?|remains?|"
    r"expires?|contains?|takes?|sends?|emails?|gets?|runs?|uses?|needs?|goes|works?|becomes?|lets?|allows?)\b",
    re.I,
)
"""A listed part with its own subject and verb ("the code stays valid for an hour", "scanning is faster"): what
the deliverable says or what the input is, not a thing to make."""
_RELATIVE = re.compile(r"\b(?:that|which|who|whose|where|when|so that|to|for|with|from|by|on|about|of)\s", re.I)
_LIST_ITEM = r"[ \t]*(?:[-*\u2022]|\d+[.)])[ \t]+"
_REQUIREMENTS = re.compile(
    r"\b(?:it|this|they|these|each|the \w+)\s+(?:must|should|shall|needs? to|has to|have to)(?: also)?:[ \t]*\n"
    r"(?P<items>(?:" + _LIST_ITEM + r".*(?:\n|$))+)",
    re.I,
)
"""A list introduced as what the deliverable must do ("It must:" and the lines under it): requirements."""
_LIST_UNDER_REQUEST = re.compile(
    r"(?P<head>[^\n.!?:]*):[ \t]*\n(?P<items>(?:"
    + _LIST_ITEM
    + r".*(?:\n|$)(?:[ \t]+(?!"
    + _LIST_ITEM
    + r").*(?:\n|$))*)+)"
)
_NOUN_PHRASE = re.compile(r"^(?:a|an|the|this|these|those|one|two|three|four|five|some|our|my)\s", re.I)
_BARE_REQUEST = re.compile(
    r"^(?:(?P<verb>give|produce|provide|send|write|draft|create|make|prepare|deliver)(?:\s+(?:me|us))?"
    r"|(?:(?:i|we)\s+)?(?:need|want|would like|'d like)|(?:can|could|may) (?:i|we) (?:get|have)"
    r"(?:\s+(?:this|it|these)(?:\s+(?:in|for|as|with|using)\s+[\w. -]{1,40})?)?"
    r"|(?:two|three|four|five) things|deliverables)$",
    re.I,
)
"""A request with no object of its own, whose list follows: "Please give me:", "I need:", "Three things:",
"Deliverables:"."""
_ABOUT_IT = re.compile(r"\b(?:for|of|about|on)\s+(?:it|them)\b", re.I)
"""A deliverable about the one before it ("a class that scales a recipe, pytest tests for it, ..."): its own part,
where "a function that takes the orders table and customer list" names data."""
_INDIRECT = re.compile(r"^(?:me|us|him|her|them)\s+", re.I)
"""The indirect object after a verb ("write me a toast")."""
_FRONTED = re.compile(r"^(?:using|given|from|based on|with|starting from|taking|for)\s", re.I)
"""A sentence that opens on its input or setting ("Using sales.xlsx ...,", "Given these figures,"): the request
may follow its comma."""
_INNER_COMMA = re.compile(r",\s*|\s[\u2014\u2013-]{1,2}\s+")
"""Where a request may start mid-sentence: after a comma, or after the dash that closes an aside."""
_INNER_REQUEST = re.compile(r"^(?:so|and|but)?\s*(?=(?:can|could|would|will) you\b|please\b)", re.I)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_SEMICOLON = re.compile(r";\s*")
_AND = re.compile(r"^(?:and|also|plus)\s+", re.I)
_COLON = re.compile(r":\s+")
_BETWEEN = re.compile(r"\b(?:between|both|either|versus|vs\.?)\s", re.I)
_BETWEEN_OPEN = re.compile(r"\bbetween\s(?!.*\sand\s)", re.I)
"""A clause whose "between" still waits for its "and": the next part is the second of the pair, whatever it is."""
_PARTS = re.compile(r",\s*(?:and\s+)?then\s+|,\s*and\s+|,\s*|\s+and then\s+|\s+then\s+|\s+and\s+|\s+as well as\s+")
_PARTS_KEPT = re.compile(f"({_PARTS.pattern})")
"""The same split, keeping each separator (a list after ``split`` alternates part and separator)."""
_PREPOSITION = re.compile(
    r"^(?:(?:with|without|including|using|in|on|for|of|from|into|by|as|at|per|via|which|who|whose|where)\b"
    r"|[a-z]+ing\s+\w)",
    re.I,
)
"""A part that qualifies the one before it: a preposition, a gerund, or a relative clause after a comma ("the
endpoint POST /v1/invoices, which takes JSON ...")."""
_GIVEN = re.compile(r"\b(?:these|those|this|the following|following|below|above)\b[\w\s',-]*$", re.I)
_DELIVERABLE_NOUN = (
    r"(?:script|function|query|queries|notice|policy|checklist|report|summary|plan|document|documentation|guide|"
    r"email|emails|letter|memo|post|page|diagram|table|list|test|tests|dashboard|presentation|slide|slides|"
    r"story|poem|song|clause|clauses|contract|agreement|disclaimer|budget|schedule|proposal|brief|briefing|handout|"
    r"quiz|outline|spreadsheet|model|service|endpoint|api|class|module|pipeline|manifest|manifests|runbook|"
    r"template|faq|glossary|timeline|roadmap|estimate|forecast|analysis|review|readme|dockerfile|view|job|"
    r"entry|file|sql|message|speech|talk|statement|procedure|exercise|exercises|problems|questions|chapter|"
    r"section|form|screen|component|migration|configuration|config|dialogue|program|tool|cli|chart|charts|"
    r"announcement|instructions|workflow|workflows|note|notes|suite|fixture|fixtures|route|routes|rule|rules|"
    r"command|invitation|article|solver|leaflet|brochure|flyer|poster|newsletter|handbook|manual|sheet|factsheet|changelog|description|schema|"
    r"playbook|explanation|explainer|requirements|commentary|toast|ddl|essay|agenda|itinerary|worksheet|nda|"
    r"overview|walkthrough|write-up|writeup|scene|one-liner|oneliner|snippet|regex|sonnet|haiku|limerick|ode|lyrics|"
    r"eulogy|obituary|tagline|slogan|synopsis|blurb|caption|captions|monologue|fable|assessment|appraisal|rubric|"
    r"scorecard|questionnaire|survey|cheatsheet|cheat-sheet|primer|tutorial|lesson|syllabus|screenplay|storyboard|"
    r"wireframe|mockup|spec|specification|postmortem|post-mortem|retrospective|flowchart|flow|wording|paragraph|"
    r"paragraphs)\b"
)
_DETERMINER = r"(?:a|an|the|one|two|three|four|five|some)\s"
_DELIVERABLE = re.compile(
    r"^"
    + _DETERMINER
    + r"\s*(?:(?!(?:to|of|for|in|on|with|by|from|each|per|about)\b)[\w'-]+\s+){0,3}?"
    + _DELIVERABLE_NOUN,
    re.I,
)
"""A part that names a deliverable of its own: a determiner, at most three words and a deliverable noun, no
preposition between ("the parties to each contract" is what is stored, not a contract to write)."""
_NOUN_FIRST = re.compile(r"^" + _DELIVERABLE_NOUN + r"\s+(?:for|at|with|covering)\s", re.I)
"""A part headed by a deliverable noun itself ("tests at 30,000, 50,000 and 60,000"): a deliverable of its own."""
_TESTS_PART = re.compile(
    r"^(?:(?:pytest|unit|integration|regression|property-based)\s+)?tests\b"
    r"(?!\s+(?:the|a|an|whether|if|it|them|its|their|that it|that they)\b)",
    re.I,
)
"""A coordinate that is tests ("pytest tests that cover the edges"): a deliverable of its own after a relative
clause, not the verb "tests" ("... and tests the connection")."""
_MORE_NOUNS = re.compile(r"(?:\s+" + _DELIVERABLE_NOUN + r")+", re.I)
_IT = re.compile(r"\bit\b")
"""The pronoun, lowercase only: "IT" names a department."""
_ONE_WORD_COORDINATE = re.compile(r"^(?:a|an|the)\s+([\w'-]+)$", re.I)
_NOUN = re.compile(_DELIVERABLE_NOUN, re.I)
_TITLE_PREPOSITION = re.compile(r"(?:to|for|about|up|down|back|out|on|in|into|with|from)\b", re.I)
_BARE_DELIVERABLE = re.compile(r"^(?!" + _DETERMINER + r")(?:[\w'-]+\s+){1,2}?" + _DELIVERABLE_NOUN, re.I)
"""A deliverable named without a determiner of its own: after "a" and one word that names no deliverable, the two
share the noun ("a password and access-control policy" is one policy; "a README and user guide" is two)."""
_REQUEST = re.compile(
    r"^(?:(?:i|we)(?: (?:also )?(?:need|want|would like|would love|love)| ?'d (?:also )?(?:like|love))"
    r"|(?:can|could|may) (?:i|we) (?:also )?(?:get|have)|need|want)\s+"
    r"(?=(?:\(?[a-h1-9]\)\s+)?"
    r"(?:(?:a|an|the|some|two|three)\b|[a-z_][a-z0-9_]*\([^()]*\)|(?:[\w'-]+\s+){0,2}?" + _DELIVERABLE_NOUN + r"\b))",
    re.I,
)
_SHARED_HEAD = re.compile(
    r"^[\w'-]+(?:\s+[\w'-]+)?\s+(?:sections|chapters|pages|parts|tests|files|endpoints|services|tables|screens|"
    r"versions|modes|steps|columns|fields|clauses)\b",
    re.I,
)
"""A part that ends in the plural noun its earlier coordinate shares ("Usage sections" of "the Installation and
Usage sections", "integration tests" of "unit and integration tests")."""
_OWN_EXPLANATION = re.compile(
    r"^(?:explain|justify|describe|comment on)\s+(?:why\b.*|how\b.*|it|them|this|that|(?:each|every)\s+[\w'-]+|"
    r"your\s+[\w'-]+|the\s+(?:code|query|choice|choices|reasoning|approach|logic|steps|trade-?offs)|"
    r"what\s+(?:it|they|this)\s+does?)$"
    r"|^show\s+(?:the\s+|your\s+|all\s+|each\s+)?(?:[\w'-]+\s+)?(?:work|working|steps|calculations?|reasoning|"
    r"derivation|workings)$",
    re.I,
)
"""A part that explains the deliverable before it ("write the index that helps it and explain why"): the same
piece of work, not a second one. An explanation with its own object or audience ("explain the change to the
finance team") is a deliverable of its own. Showing the work ("solve for x and show the steps") is the same."""
_INFINITIVE = re.compile(r"\bto\s+([A-Za-z'-]+)")
"""An infinitive inside a clause: its coordinated verbs ("to set up X, install Y and run Z") are one purpose."""
_SOURCE_FILE = re.compile(r"^[\w-]+\.(?:py|sh|sql|ini|toml|ya?ml|cfg|conf|js|ts|go|rs)\b", re.I)
"""A part headed by the name of a code or configuration file ("diskwatch.py with ..."): a file to write."""
_PRONOUN = re.compile(r"(?:it|them|this|that|these|those)", re.I)
"""An object that is a pronoun: "write it, pytest tests ..." names the code, which the tests do not share a noun with
(multipart_set3: "Please write it, pytest tests using December 2026 dates, and two sentences ..." read the code and
its tests as one part)."""
_ONE_WORD_OBJECT = re.compile(r"^(?:(?:the|a|an|our|its|their|your|my)\s+)?[\w'-]+$", re.I)
_CODE = re.compile(r"```.*?```", re.S)
_QUOTED = re.compile(r"\"[^\"\n]{0,400}\"|(?<!\w)'[^'\n]{3,400}'(?!\w)")
"""A quoted span; a single quote opens one only where no letter is before it ("I'd ... next year's" is none)."""
_BRACKETED = re.compile(
    r"\([^()\n]{0,400}\)|\[[^\[\]\n]{0,400}\]"
    r"|(?<=\s)[\u2014\u2013-]{1,2}\s[^\u2014\u2013\n]{1,400}?\s[\u2014\u2013-]{1,2}(?=\s)"
)
"""A parenthesised or bracketed span ("customers(id, name)"), or an aside between dashes (" — a Members tab (...), a
Sessions tab ... — "): its commas and "and"s are not the task's."""
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_PLACEHOLDER = "\x00"
_COMMA = "\x01"
_SEMI = "\x02"
_FIGURE_ONLY = re.compile(r"^[$€£]?\d[\d" + _COMMA + r".]*\s*(?:%|[a-z]{1,3})?$", re.I)
"""A listed part that is a figure alone ("tests at 30,000, 50,000 and 60,000"): more of the clause before it (its
thousands separators shielded as :data:`_COMMA`)."""
_VAGUE = re.compile(
    r"^(?:help(?:\s+(?:me|us|him|her|them))?(?:\s+(?:with|on|out)\b.*)?"
    r"|(?:sort|figure|work)\s+(?:it|this|that|them)\s+out\b.*"
    r"|(?:handle|deal with|take care of|look (?:at|into))\s+(?:it|this|that|them)\b.*"
    r"|\w+\s+(?:these|those|them|the following|both)(?:\s+(?:two|three|four|five|six|\w+s))?\s+"
    r"(?:in|into|to|inside)\s+(?:it|them|there|the\s+[\w.-]+))$",
    re.I,
)
"""An aspect that asks for help with the whole task or puts listed things into a deliverable, naming none of its own:
beside the task's deliverables it is their context ("can you sort it out for him?" above a forwarded request for
two tables and two queries: multipart_set5_first planned that one aspect; "Put these three in it" of a flags file
became a third part that repeated the module)."""
_DOCS_LINE = re.compile(
    r"^(?:(?:[-*\u2022]|\d+[.)])\s+(?:(?:and|also|plus)\s+)?(?:a|an|the)\s+|(?:(?:and|also|plus)\s+)?(?:a|an)\s+)"
    r"(?:short\s+|brief\s+)?"
    r"(?:readme|usage|docs?|documentation|user\s+guide)\b",
    re.I,
)
"""A list line under a request that asks for its documentation ("5. a README "Usage" section with the synopsis
..."), where the lines before it say what the tool does: a deliverable of its own (multipart_set5_first: the
colstats README section was read as one more requirement, and the one part wrote two options of it)."""
_COUNTED = re.compile(
    r"^(?:(?:then|and|also|plus)\s+)*(?P<count>two|three|four|five|[2-5])\s+(?P<noun>[\w-]+)\s*:\s*(?P<items>.+)$",
    re.I | re.S,
)
_LETTER = re.compile(r"(?:^|(?<=[;,])\s*(?:and\s+)?|\s+and\s+)\(?(?P<label>[a-h]|[1-9])\)\s+", re.I)
_FIRST_LETTER = re.compile(r"^[\w'-]+\s+(?:(?:me|us)\s+)?(?P<label>\(?(?:a|1)\)\s+)", re.I)
"""A verb whose objects are lettered or numbered, the first right after it ("write (a) the API description ...")."""
_COUNTS = {"two": 2, "three": 3, "four": 4, "five": 5}


@dataclass(frozen=True)
class Aspect:
    """One deliverable a task names: its text (verb and object, as written), its verb, and its context.

    The context is what the task says around it: the goal a listed deliverable serves ("Secure the backend: add
    X, Y and Z"), or else the task's sentences that give context rather than instructions.
    """

    text: str
    verb: str
    context: str = ""


def task_aspects(task: str) -> list[Aspect]:
    """The deliverables ``task`` names, in the order it names them (at least one: the task itself)."""
    found = named_deliverables(task)
    if not found:
        whole = " ".join(task.split())
        return [Aspect(whole, _first_word(whole))]
    return found


def aspect_title(aspect: Aspect) -> str:
    """A section title for ``aspect``: what it delivers, not the instruction to write it.

    "Write a password policy for our company" is titled "Password policy for our company": a small model handed
    an instruction as the heading of its part reads the heading as one item of a list of instructions, writes
    "2. Write a ...", and loops on it. Verbs outside :data:`TITLE_VERBS` keep the aspect as written ("Propose
    indexes"), first letter upper.
    """
    text = " ".join(aspect.text.split()).rstrip(".:")
    if aspect.verb.lower() in TITLE_VERBS:
        obj = _INDIRECT.sub("", text[len(aspect.verb) :].strip())  # "write me a little convert_length(...)"
        obj = re.sub(r"^(?:a|an|the|some|its|their|our|your|my)\s+", "", obj, flags=re.I)
        if obj and not _TITLE_PREPOSITION.match(obj):  # "write to the landlord" names no deliverable
            text = obj
    if _IDENTIFIER.match(text) or _SOURCE_FILE.match(text):
        return text  # "parking_fee(minutes) in tariff.py": a name the code must keep (a part titled
        # "Parking_fee(minutes) ..." defined Parking_fee, and the tests imported parking_fee)
    return text[:1].upper() + text[1:]


_IDENTIFIER = re.compile(r"^[a-z]\w*(?:_\w*\b|\()")
"""A code name at the start of a title: a word with an underscore, or a name before its parameters."""


def asks_for_work(description: str) -> bool:
    """Whether an assist's ``description`` asks for a piece of work rather than a fact (:data:`WORK_VERBS`).

    "write a SQL query that totals revenue per customer" and "please review the reset flow for threats" do; "the
    current VAT rate in Germany", "what the index should be" and "explain the join" do not (a brief answer serves).
    """
    words = re.findall(r"[a-z][a-z'-]*", description.lower())
    while words and words[0] in ("please", "also", "then", "now"):
        words.pop(0)
    return bool(words) and words[0] in WORK_VERBS


def deliverable_noun(aspect: Aspect) -> str | None:
    """The deliverable noun ("policy", "checklist", "script" ...) that heads ``aspect``'s object, lowercase.

    Only the object's own words count, not what qualifies it: "summarise the guidance for a patient handout" names
    no deliverable noun (the handout is what the summary is for).
    """
    found = _NOUN.search(object_phrase(aspect))
    return found.group(0).lower() if found else None


MESSAGE_NOUNS = frozenset("email emails letter message memo note notes announcement invitation".split())
"""Deliverables a person sends to someone: after a calculation, the message that quotes its figures."""
_WORKING = re.compile(
    r"^show\s+(?:me\s+)?(?:the\s+|your\s+|all\s+)?(?:work|working|workings|calculations?|steps)\b", re.I
)


def kinds_apart(aspects: list[Aspect]) -> str | None:
    """Why ``aspects`` are deliverables of different kinds, or None.

    Tests beside what they test, two different deliverable nouns ("a late-payment clause" and "a reminder
    letter"), or a calculation and a message that quotes it ("show the working ..." and "write the message to the
    staff group chat ...").

    Such a task is several pieces of work however it reads: the planner model's one-word reading called six of the
    57 multi-part tasks of bench/data/multipart_tasks*.yaml ONE, each of them one of these (the merge_ranges module
    and its pytest tests, the consulting agreement and its plain-language summary, the tip-out's working and its
    staff message), and no single-deliverable task of the planning sets is one (docs/decisions/planning.md).
    """
    objects = [_INDIRECT.sub("", a.text[len(a.verb) :].strip()) for a in aspects]
    tests = [bool(_TESTS_PART.match(re.sub(r"^(?:the|some)\s+", "", o, flags=re.I))) for o in objects]
    if any(tests) and not all(tests):
        return "tests beside what they test"
    nouns = {n for a in aspects if (n := deliverable_noun(a)) not in (None, "test", "tests")}
    if len(nouns) >= 2:
        return "different deliverables (" + ", ".join(sorted(nouns)) + ")"
    worked = [a for a in aspects if a.verb.lower() in COMPUTE_VERBS or _WORKING.match(a.text)]
    sent = sorted(nouns & MESSAGE_NOUNS)
    if worked and sent and len(worked) < len(aspects):
        return f"a calculation and the {sent[0]} that quotes it"  # "show the working ...", "write the message ..."
    return None


def object_phrase(aspect: Aspect) -> str:
    """``aspect``'s object up to the first preposition or relative clause ("a password and access-control policy")."""
    obj = aspect.text[len(aspect.verb) :].strip()
    relative = _RELATIVE.search(obj)
    return obj[: relative.start()].strip() if relative else obj


_PARAMETER = r"\s*[A-Za-z_]\w*\s*(?:=\s*[^,()]+)?"
_PROSE_CALL = re.compile(r"(?<![\w.])([A-Za-z]\w*_\w*)\((" + _PARAMETER + r"(?:," + _PARAMETER + r")*)?\)")
"""A function named in the task's words with its parameters: ``cart_total(lines, code=None)``, ``parking_fee(minutes)``
(a name with an underscore, not a method after a dot, the parameters names or defaults)."""


def named_functions(task: str) -> dict[str, str]:
    """The functions ``task``'s words name with their parameters (not a builtin), with their signatures.

    Each signature as the task first writes it ("load_flags(path)"); its fenced code defines what it defines and is
    not read.
    """
    found: dict[str, str] = {}
    for m in _PROSE_CALL.finditer(_CODE.sub(" ", task)):
        if not hasattr(builtins, m.group(1)):
            found.setdefault(m.group(1), " ".join(m.group(0).split()))
    return found


def named_deliverables(task: str) -> list[Aspect]:
    """The deliverables the pass finds in ``task``'s instructions, in order.

    None when it finds no instruction, or more than :data:`MAX_ASPECTS` (a list of requirements, not of
    deliverables).
    """
    body = _shielded(_CODE.sub(" ", task))
    body = _THOUSANDS.sub(_COMMA, body)  # "a 250,000 loan" is one figure, not a list
    aspects: list[Aspect] = []
    context: list[str] = []
    body = _LIST_UNDER_REQUEST.sub(_listed_requests, body)
    numbered, body = _deliverable_list(body)
    aspects += numbered
    if required := _REQUIREMENTS.search(body):
        # "Mutual NDA for ... It must:\n1. define confidential information ...": the list says what the one
        # deliverable does, it names no deliverables
        context.append(" ".join(required.group("items").split()))
        body = body[: required.start("items")] + body[required.end("items") :]
    sentences: list[str] = []
    counted: dict[str, list[Aspect]] = {}  # a sentence that lists its deliverables by letter, and them
    for whole in _SENTENCES.split(body):
        if requests := _semicolon_requests(whole) or _semicolon_headlines(whole):
            sentences += requests
            continue
        if lettered := _counted_items(whole):
            counted[whole] = lettered
            sentences.append(whole)
            continue
        for at, piece in enumerate(p.strip().rstrip(".!?").strip() for p in _SEMICOLON.split(whole)):
            sentences.append(_listed_after(sentences[-1], piece) if at else piece)
    goals = [s for s in sentences if _OWN_GOAL.match(s)]
    if len(goals) < len(sentences) and any(_sentence_aspects(s) for s in sentences if s not in goals):
        # "We want to split the module out. Give the steps.": what the person means to do is the context of
        # what they ask for, not a second deliverable.
        context += goals
        sentences = [s for s in sentences if s not in goals]
    for sentence in sentences:
        if sentence in counted:
            aspects += counted[sentence]  # "Then two queries: (a) ...; (b) ..."
            continue
        head, *tail = _COLON.split(sentence, maxsplit=1)
        if tail and _LABEL.match(head):
            head, tail = tail[0], []  # "Format: h, m and s parts ...": a label, not the verb "format"
        if tail and not _sentence_aspects(head) and len(inner := _request_inside(head)) == 1:
            # "For the patient portal - which stores lab results - write the threat model: assets, trust boundaries
            # and the top threats with mitigations": the request inside the head is what the colon's list serves
            scene, head = inner[0].context, inner[0].text
        else:
            scene = ""
        listed = _sentence_aspects(tail[0]) if tail else []
        if tail and not listed:
            listed = _listed_objects(head, tail[0]) or _requested_items(head, tail[0])
        if len(listed) >= 2:
            # "Secure the backend: add X, Y and Z": the words before the colon name the goal the list serves.
            aspects += [Aspect(a.text, a.verb, f"{scene}, {head}" if scene else head) for a in listed]
        elif scene and len(found := _sentence_aspects(head) + listed) == 1 and not listed:
            aspects.append(Aspect(f"{found[0].text}: {tail[0]}", found[0].verb, scene))  # what it covers, kept
        elif found := _sentence_aspects(head) + listed:
            aspects += found
        elif found := _request_inside(sentence):
            aspects += found  # "Using sales.xlsx and fx_rates.csv, write a pandas script that ..."
        elif found := _headline_list(sentence):
            aspects += found  # "k8s CronJob manifest to run ... + the python report script itself"
        elif found := _code_and_tests(sentence):
            aspects += found  # "Code + pytest tests, include a round-trip test", "Function plus pytest tests please"
        elif aspects and (_TESTS_LINE.match(sentence) or _DOCS_LINE.match(sentence)):
            listed_line = _AND.sub("", _BULLET.sub("", sentence)).rstrip(":")
            aspects.append(Aspect(f"write {listed_line}", "write"))  # a list line "- pytest tests for both"
        elif aspects and (found := _tests_and_more(head)):
            aspects += found  # "Acceptance: pytest tests covering the 29 February rule, plus a one-paragraph note"
        elif aspects and (more := _follow_up(sentence)):
            aspects.append(Aspect(f"{aspects[-1].verb} {more}", aspects[-1].verb))  # "And maybe three toasts ..."
        elif tail and (found := _terse_list(tail[0])):
            aspects += [Aspect(a.text, a.verb, head) for a in found]  # "Loan ...: monthly payment, Python script ..."
        elif sentence:
            context.append(sentence)  # "Our report query takes 3 minutes."
    if numbered:  # "Could you do:" above the list it introduced asks for nothing of its own
        aspects = [a for a in aspects if a in numbered or not re.fullmatch(r"[\w'-]+\s*:?", a.text.strip())]
    if any(not _VAGUE.match(a.text) for a in aspects):
        # "can you sort it out for him?", "could you help with the tip-out ...?" above what is asked: the request
        # the deliverables answer, not one of them; "Put these three in it": what goes into one
        context += [a.text for a in aspects if _VAGUE.match(a.text)]
        aspects = [a for a in aspects if not _VAGUE.match(a.text)]
    given = _clip(". ".join(context))
    seen: set[str] = set()
    unique: list[Aspect] = []
    for aspect in aspects:
        key = aspect.text.lower()
        if key not in seen:
            seen.add(key)
            around = _unshield(_clip(aspect.context) or given)
            text = _resolve_it(aspect, unique[0]) if len(unique) == 1 else aspect.text
            unique.append(Aspect(_unshield(text), aspect.verb, around))
    return unique if len(unique) <= MAX_ASPECTS else []


_HEADLINE = re.compile(
    r"^(?:(?:i|we)\s+)?(?:need|want)?\s*(?:"
    + _DETERMINER
    + r")?\s*(?:[\w'/.-]+\s+){0,4}?"
    + _DELIVERABLE_NOUN
    + r"(?=\s+(?:for|of|on|about|to|that|which|in|with|from|\w+ing)\b|\s*[:.,]|\s*$)",
    re.I,
)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s*")
_AUDIENCE = re.compile(r"^(?:for|to)\s[^:]{1,80}:\s*", re.I)


def headline_deliverable(task: str) -> str | None:
    """The deliverable a task without instructions is headed by ("Threat model for the Stripe webhook: ..."), or None.

    Only the task's first sentence counts, after an audience written before a colon ("For the night shift: a
    runbook for ..."): a noun phrase of at most four words and a deliverable noun, followed by what it is for or
    about, a colon, or the end; and no later sentence, list line or listed part is headed by another.
    """
    first, *rest = (s.strip() for s in _SENTENCES.split(_CODE.sub(" ", task).strip()))
    first = _AUDIENCE.sub("", first)
    found = _HEADLINE.match(first)
    if found is None:
        return None
    listed = [_BULLET.sub("", part) for line in rest for part in _PARTS.split(line)]
    if any(_HEADLINE.match(part.strip()) for part in listed):
        return None  # "SQL: claims filed last month. Python script mailing that list ...": two deliverables
    after = _PLUS.sub(" and ", first[found.end() :])
    if any(_DELIVERABLE.match(_AND.sub("", part.strip())) for part in _PARTS.split(_shielded(after))):
        # "Flask /healthz endpoint that checks the DB, a Dockerfile for the app, and ...": a list; where "Security
        # requirements for the portal: password rules, MFA, ..." lists what the one deliverable covers
        return None
    return found.group(0).strip()


_PLUS = re.compile(r"\s\+\s(?=(?:a|an|the|its|our|my)\s)", re.I)
"""A "+" that joins two noun phrases ("... at 02:00 UTC + the python report script"), not figures ("CPI + 1%")."""


def _headline_list(sentence: str) -> list[Aspect]:
    """The deliverables of a sentence with no instruction that lists them: each a headline or a determined one.

    "k8s CronJob manifest to run our nightly report at 02:00 UTC + the python report script itself (...)": the
    first part is headed by a deliverable noun, a later coordinated part names another ("the ... script"); each
    is delivered. A sentence headed by one deliverable whose later parts name none is no list (none here: the
    scope reads it as that deliverable, :func:`headline_deliverable`).
    """
    parts = [p.strip() for p in _PARTS.split(_PLUS.sub(" and ", sentence)) if p.strip()]
    if not parts or not _HEADLINE.match(parts[0]):
        return []
    items: list[str] = []
    for part in parts:
        bare = _AND.sub("", _LEAD.sub("", part))  # "Then pytest tests, and a short README usage section ..."
        if not items or _DELIVERABLE.match(bare):
            items.append(bare)
        else:
            items[-1] = f"{items[-1]} and {bare}"
    return [Aspect(f"deliver {item}", "deliver") for item in items] if len(items) >= 2 else []


_TESTS_WORDS = r"(?:(?:some|the)\s+)?(?:(?:pytest|unit)\s+)?tests\b"
_TESTS_LINE = re.compile(
    r"^(?:(?:[-*\u2022]|\d+[.)])\s+)?(?:(?:and|also|plus)\s+)?"
    + _TESTS_WORDS
    + r"(?:\s+(?:for|of|covering)\s[^.:;]{1,60})?(?:,?\s+please)?$",
    re.I,
)
"""A sentence or list line that asks for tests alone, with no verb ("pytest tests for both"): after a request, a
deliverable of its own (multipart_set4_first: a bulleted list's last line, planned as part of the module)."""
_CODE_AND_TESTS = re.compile(
    r"^(?P<code>(?:the\s+)?(?:code|function|functions|implementation|module))\s*(?:\+|&|,|\band\b|\bplus\b)\s*"
    r"(?P<tests>" + _TESTS_WORDS + r"[^.;]{0,120}?)(?:,?\s+please)?$",
    re.I,
)
_AND_MORE = re.compile(r"(?:,\s*(?:and\s+|plus\s+)?|\s+(?:and|plus)\s+)(?=" + _DETERMINER + r")", re.I)
"""Where the tests end and a third deliverable starts: "Code, pytest tests, and a short README paragraph ..."."""


def _code_and_tests(sentence: str) -> list[Aspect]:
    """The code and its tests, asked for in a sentence with no verb; else none.

    "Code + pytest tests, include a round-trip test over the whole range", "Function plus pytest tests please":
    both are written apart, so the tests are run against the code (multipart_set3_first and multipart_set4_first:
    each was one part, or six). A deliverable after the tests is a third ("Code, pytest tests, and a short README
    paragraph with one example of each function": multipart_set5_first read none of the three, and its one part,
    routed to the math expert for the checksum words, wrote prose about the functions, no code).
    """
    found = _CODE_AND_TESTS.match(sentence.strip())
    if found is None:
        return []
    code = re.sub(r"^the\s+", "", found.group("code"), flags=re.I).lower()
    return [Aspect(f"write the {code}", "write"), *_tests_then(found.group("tests"))]


def _tests_then(text: str) -> list[Aspect]:
    """The tests of ``text`` and the deliverable named after them, if any ("pytest tests, and a short README")."""
    tests, *more = _AND_MORE.split(text.strip(), maxsplit=1)
    named = [m for m in more if _DELIVERABLE.match(m)]
    return [Aspect(f"write {tests.strip()}", "write"), *(Aspect(f"write {m.strip()}", "write") for m in named)]


_TESTS_AND_MORE = re.compile(r"^(?P<tests>" + _TESTS_WORDS + r"[^.;]{0,240}?)$", re.I)


def _tests_and_more(text: str) -> list[Aspect]:
    """Tests and a deliverable after them, asked for with no verb after a request; else none.

    "Acceptance: pytest tests covering the 29 February rule, plus a one-paragraph note for the HR policy wiki
    ..., with one example" (multipart_set5_first, after its scored run: read as context, the tests and the note
    were not asked of anyone, and the one part wrote neither whole).
    """
    found = _TESTS_AND_MORE.match(_AND.sub("", _BULLET.sub("", text.strip())))
    listed = _tests_then(found.group("tests")) if found else []
    return listed if len(listed) >= 2 else []


_FOLLOW_UP = re.compile(
    r"^(?:and|also|plus|then)\b(?:\s*,?\s*(?:then|also|maybe|perhaps|possibly|ideally|if [^,]{1,60},))*\s*,?\s*",
    re.I,
)


def _follow_up(sentence: str) -> str | None:
    """The deliverable a sentence adds to the request before it, without a verb of its own, or None.

    "Could you write me a short story ...? ... And then, if it's not too much, some discussion questions and a
    vocab list I can use with it?": "some discussion questions and a vocab list ..." is made as the story is.
    """
    lead = _FOLLOW_UP.match(sentence)
    rest = sentence[lead.end() :] if lead else ""
    named = _DELIVERABLE.match(rest) or _NOUN_FIRST.match(rest) or _BARE_DELIVERABLE.match(rest)
    return rest if lead and named else None


def _terse_list(listing: str) -> list[Aspect]:
    """The parts after a colon of a sentence with no instruction, when two or more are deliverables without a verb.

    "Loan 250,000 at 4.5% over 25 yrs: monthly payment, Python script printing the amortisation table, letter
    explaining it to the borrower": each listed part is delivered; "Dockerfile: multi-stage build, non-root user"
    lists what the one deliverable is like, "...: a plain explanation of X, what they should weigh up, and what to
    ask" what it covers, and "Question: shared schema, schema per tenant, or database per tenant?" a choice.
    """
    parts = [_AND.sub("", p.strip()) for p in _PARTS.split(listing) if p.strip()]
    named = [p for p in parts if _DELIVERABLE.match(p) or _BARE_DELIVERABLE.match(p) or _NOUN.match(p)]
    if (
        len(named) < 2
        or listing.rstrip().endswith("?")
        or re.search(r"\bor\b", listing)
        or any(_PREPOSITION.match(p) or _TOPIC.match(p) or _first_word(p) in VERBS for p in parts)
    ):
        return []  # a choice ("shared schema, schema per tenant, or database per tenant?"), or what one covers
    return [Aspect(f"deliver {p}", "deliver") for p in parts]


def _resolve_it(aspect: Aspect, first: Aspect) -> str:
    """The second aspect's text with its "it" naming the deliverable of the ``first``, when that is one.

    A slot is written (and routed) from its aspect alone: "write a checklist IT can use to audit it every
    quarter" says nothing of what is audited, and went to the SQL expert; "... to audit the password and
    access-control policy ..." names it. Only a lowercase "it" after the verb ("IT" is a department), and only
    with one deliverable before it: after two, "it" may be either ("a cron entry to run it" after a job and its
    SQL).
    """
    pronoun = _IT.search(aspect.text, len(aspect.verb))
    if _IT.search(first.text, len(first.verb)):
        return aspect.text  # "do a security review of it, rewrite it in Python": both name the same outside thing
    phrase = object_phrase(first)
    named = _DELIVERABLE.match(phrase)
    if pronoun is None or named is None:
        return aspect.text
    more = _MORE_NOUNS.match(phrase, named.end())  # "a CLI tool", not "a CLI"
    # up to its noun: "the mutual NDA", not "the mutual NDA between our studio and a freelance illustrator"
    referent = re.sub(r"^(?:a|an|one)\s", "the ", phrase[: more.end() if more else named.end()], flags=re.I)
    return aspect.text[: pronoun.start()] + referent + aspect.text[pronoun.end() :]


def _shielded(text: str) -> str:
    """``text`` with the commas, semicolons and "and"s of its quoted and bracketed spans hidden from a split."""
    return _BRACKETED.sub(_shield, _QUOTED.sub(_shield, text))


def _shield(match: re.Match[str]) -> str:
    """A quoted or bracketed span with its "and"s and commas hidden from the split."""
    return match.group(0).replace(" and ", f" {_PLACEHOLDER} ").replace(",", _COMMA).replace(";", _SEMI)


def _unshield(text: str) -> str:
    return text.replace(_PLACEHOLDER, "and").replace(_COMMA, ",").replace(_SEMI, ";")


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + "..."


def _sentence_aspects(sentence: str) -> list[Aspect]:
    text = _LEAD.sub("", _ASIDE.sub("", _LEAD.sub("", sentence).strip()))  # "Also (bear with me, ...) I need a ..."
    text = _ENUMERATOR.sub("", _SEE.sub("show ", text))
    request = _REQUEST.match(text)
    if request is not None:
        text = "deliver " + _ENUMERATOR.sub("", text[request.end() :])
    if (
        not text
        or _first_word(text) not in VERBS
        or text.split()[0].isupper()
        or _CONSTRAINT.match(text)
        or _QUESTION_DO.match(text)
    ):
        return []  # context, a question, a condition on the deliverable, or code ("SELECT * FROM ...")
    for pair in BINOMIALS:
        text = re.sub(re.escape(pair), pair.replace(" and ", f" {_PLACEHOLDER} "), text, flags=re.I)
    first_letter = _FIRST_LETTER.match(text)  # "write (a) the API description ..., (b) the implementation ..."
    text = text[: first_letter.start("label")] + text[first_letter.end() :] if first_letter else text
    aspects: list[Aspect] = []
    verb = ""
    clause = ""  # the current aspect's text
    pieces = _PARTS_KEPT.split(text)
    for raw, sep in zip(pieces[::2], ["", *pieces[1::2]], strict=True):
        part = _AND.sub("", raw.strip())  # "..., plus the appointment letter"
        if not part:
            continue
        joined = re.sub(r"\s+", " ", sep) if sep.strip() else " and "  # the task's own separator
        more = _AND.match(raw.strip())
        if more and not sep.strip().endswith(("and", "then")):
            joined += more.group(0)  # ", plus the ..."
        lettered = first_letter is not None and _ENUMERATOR.match(part) is not None
        part = _ENUMERATOR.sub("", part)  # "(2) rewrite it ..."
        bare = _LEAD.sub("", part)  # without "please", "then", "and" ...
        head = _first_word(bare)
        if clause and lettered and head not in VERBS and verb not in JOINT_VERBS:
            # the next item the verb's letters list: "(b) the implementation in one file, shortener.py, ..."
            # (multipart_set5_first joined the API description and the implementation in one part)
            aspects.append(Aspect(clause, verb))
            clause = f"{verb} {part}"
        elif clause and first_letter is not None and head not in VERBS:
            clause = f"{clause}{joined}{part}"  # more of the lettered item: "..., shortener.py, using only ..."
        elif clause and _OWN_EXPLANATION.match(bare):
            clause = f"{clause}{joined}{part}"  # "... and explain why": the explanation of what the clause makes
        elif clause and _shapes(bare, head) and deliverable_noun(Aspect(clause, verb)) is not None:
            clause = f"{clause}{joined}{part}"  # "write a short story ... and set it in 1953 and end it on ...": how
        elif (
            clause
            and head in VERBS
            and _infinitive_open(clause)
            and not (head in MAKING_VERBS and _DELIVERABLE.match(bare[len(head) :].lstrip()))
        ):
            clause = f"{clause}{joined}{part}"  # "a guide to set up X, install Y and run Z": the steps of one thing
        elif clause and head in RESULT_VERBS and (not _NOUN.search(bare) or _SHOWN_AS.match(bare)):
            clause = f"{clause}{joined}{part}"  # "test whether X changed and give the 95% interval": one analysis
        elif head in VERBS:
            if clause:
                aspects.append(Aspect(clause, verb))
            verb, clause = head, _LEAD.sub("", part)
        elif not clause:
            continue
        elif (
            _PREPOSITION.match(part)
            or _FIGURE_ONLY.match(part)
            or _BETWEEN_OPEN.search(clause)
            or (
                _SHARED_HEAD.match(part)
                and _ONE_WORD_OBJECT.match(clause[len(verb) :].strip())
                and not _PRONOUN.fullmatch(clause[len(verb) :].strip())
            )
            or (_BARE_DELIVERABLE.match(part) and _shares_noun(clause[len(verb) :].strip()))
            or (_describes(part) and _DELIVERABLE.match(_INDIRECT.sub("", clause[len(verb) :].strip())))
            or (
                (
                    verb in JOINT_VERBS | RESULT_VERBS | COMPUTE_VERBS
                    or _RELATIVE.search(clause[len(verb) :] + " ")
                    or _BETWEEN.search(clause)
                )
                and not _DELIVERABLE.match(part)
                and not (_BARE_DELIVERABLE.match(part) and _ABOUT_IT.search(part))
                and not _NOUN_FIRST.match(part)
                and not _TESTS_PART.match(part)
            )
        ):
            clause = f"{clause}{joined}{part}"  # still the same piece of work
        else:
            aspects.append(Aspect(clause, verb))
            clause = f"{verb} {part}"
    if clause:
        aspects.append(Aspect(clause, verb))
    return aspects


_SHOWN_AS = re.compile(r"^[\w'-]+\s+(?:it|them)\s+(?:in|as|inside|within)\s", re.I)
"""A result verb on the deliverable before it, naming the form it is handed over in ("write a regex ... and show
it in a Python snippet that tests ..."): the same deliverable, shown, not a snippet of its own."""


OWN_WORK_ON_IT = frozenset("diagram package".split())
"""Words outside :data:`VERBS` whose work on the deliverable before them is a deliverable of its own ("... and
package it"); an instruction verb on "it" ("and test it", "and schedule it nightly") is one unless it is in
:data:`SHAPING_VERBS` ("set it in 1953")."""
SHAPING_VERBS = frozenset("set keep end start begin base name title limit cap format style address aim target".split())
"""Instruction verbs that, on "it", say how the deliverable before them is made ("set it in 1953")."""
_BACK = re.compile(r"^[\w'-]+\s+(?:it|them)\b(?!\s+(?:up|out)\b)", re.I)


def _shapes(part: str, head: str) -> bool:
    """Whether a coordinated ``part`` says how the deliverable before it is made, not what else to make.

    After a clause that names a deliverable ("Write a short story about a lighthouse keeper", "design our
    password reset flow"): a verb on "it" or "them" that shapes it ("set it in 1953", "expire them after 15
    minutes"; not "rewrite it in Python", not "test it"), a condition ("make sure ..."), "make" with no
    deliverable ("make the tokens single-use"), or a part that is no instruction and names no deliverable ("tell
    it only through his logbook entries", "rate-limit requests per account"). A deliverable named in the part
    ("and a README", "and diskwatch.py") is always its own.
    """
    if _DELIVERABLE.match(part) or _ABOUT_IT.search(part) or _NOUN_FIRST.match(part) or _SOURCE_FILE.match(part):
        return False
    if _CONSTRAINT.match(part):
        return True  # "and make sure it never reveals whether an email is registered"
    if _BACK.match(part):
        return head in SHAPING_VERBS or head not in VERBS | OWN_WORK_ON_IT
    if head == "make":
        return not _NOUN.search(part[len(head) :])
    return head not in VERBS and not re.match(_DETERMINER, part, re.I) and not _NOUN.search(part)


_NUMBERED = re.compile(r"(?m)^[ \t]*\d+[.)][ \t]+(.*)$")
_SIGNATURE_FIRST = re.compile(r"^[a-z_]\w*\([^()]*\)")
_SAME_MODULE = re.compile(r"\bin the same (?:module|file)\b", re.I)


def _deliverable_list(body: str) -> tuple[list[Aspect], str]:
    """The deliverables of a numbered list that stands alone, each line one, and the body without the list.

    Every line must open with a deliverable: a source file ("splitbill.py with split_bill(...)"), a function and
    its parameters, tests, or a noun phrase naming one ("A short README "Usage" section ..."); a line whose
    function goes "in the same module" is part of the line before it. Anything else (steps, requirements with
    their verbs, figures) is no such list, and the body is left as it was. multipart_set5_first (after its scored
    run): the bill splitter's four lines were read as no deliverable, and its one part wrote the tests alone.
    """
    lines = _NUMBERED.findall(body)
    if len(lines) < 2 or len(lines) != len(re.findall(r"(?m)^[ \t]*\d+[.)]", body)):
        return [], body
    items = [_AND.sub("", line.strip()) for line in lines]
    if not all(
        _SOURCE_FILE.match(i) or _SIGNATURE_FIRST.match(i) or _TESTS_PART.match(i) or _DELIVERABLE.match(i)
        for i in items
    ):
        return [], body
    merged: list[str] = []
    for item in items:
        if merged and _SAME_MODULE.search(item) and _SIGNATURE_FIRST.match(item):
            merged[-1] = f"{merged[-1].rstrip('.')}; and {item}"
        else:
            merged.append(item)
    if len(merged) < 2:
        return [], body
    return [Aspect(f"write {m.rstrip('.')}", "write") for m in merged], _NUMBERED.sub("", body)


def _listed_requests(block: re.Match[str]) -> str:
    """A list under a request with no object, one request per line, when every line is a noun phrase.

    "Please give me:" and the lines "1) the DDL ..." and "2) a runbook ..." become "give me the DDL ..." and "give
    me a runbook ...", one sentence each; a list whose lines are not noun phrases (a determiner, or a deliverable
    noun) stays as written. Continuation lines (indented, such as pasted code) stay under their item.
    """
    verb = _request_verb(block.group("head"))
    if verb is None:
        return block.group(0)
    items: list[list[str]] = []
    for line in block.group("items").splitlines():
        if re.match(_LIST_ITEM, line):
            items.append([re.sub("^" + _LIST_ITEM, "", line).strip().rstrip(":")])
        elif items:
            items[-1].append(line)
    firsts = [_AND.sub("", item[0]) for item in items]
    if not _noun_phrases(firsts):
        return block.group(0)  # "I need:\n- it to be fast\n- ...": what the deliverable must be
    lines = [""]  # the request itself says nothing the lines do not
    for first, item in zip(firsts, items, strict=True):
        # an item's semicolons are its own ("1. the schema ... and INSERTs for the results below; a fixture that
        # hasn't been played yet has NULL goals": multipart_set5_first made the fixture a part of its own)
        lines.append(f"{verb} {first.rstrip('.').replace(';', _SEMI)}.")
        lines += item[1:]
    return "\n".join(lines) + "\n"


def _requested_items(head: str, listing: str) -> list[Aspect]:
    """The items listed after a request with no object, when each is a noun phrase; else none.

    "I need: the depreciation schedule, the journal entry for year one, and a short note to the owner" names three
    (multipart_set2_first: it was planned as one slot, and the one answer got every figure wrong).
    """
    verb = _request_verb(head)
    parts = [p.strip() for p in _PARTS.split(listing) if p.strip()]
    if verb is None:
        return []
    if not _noun_phrases(parts):
        parts = _deliverables_with_detail(listing)
    return [Aspect(f"{verb} {part}", verb) for part in parts] if len(parts) >= 2 else []


def _deliverables_with_detail(listing: str) -> list[str]:
    """The parts of ``listing`` as deliverables, each with the parts after it that name none, as written.

    "..., the worst shortfall first, then by sku" is more of "a query listing the products at or below their
    reorder level"; none unless the first part is a noun phrase and two or more name a deliverable.

    "Can we have this in SQLite: the two tables (...), a query giving the current stock of every product (...), and a
    query listing the products at or below their reorder level, the worst shortfall (...) first, then by sku"
    (multipart_set5_first: read as no deliverable, one part wrote the tables and one query, and the reorder query
    was missing with nothing said).
    """
    pieces = _PARTS_KEPT.split(listing.strip())  # part, separator, part, ...
    items: list[str] = []
    for at in range(0, len(pieces), 2):
        part = _AND.sub("", pieces[at].strip())
        if not items and not _NOUN_PHRASE.match(part):
            return []
        if not items or _DELIVERABLE.match(part) or _NOUN_FIRST.match(part) or _TESTS_PART.match(part):
            items.append(part)
        elif part:
            items[-1] = f"{items[-1]}{pieces[at - 1]}{pieces[at].strip()}"
    return items if len(items) >= 2 else []


def _request_verb(head: str) -> str | None:
    """The verb of a request with no object of its own (:data:`_BARE_REQUEST`; "deliver" for "I need:"), or None."""
    request = _BARE_REQUEST.match(_LEAD.sub("", head.strip()))
    if request is None:
        return None
    return request.group("verb").lower() if request.group("verb") else "deliver"  # "Please give me:" -> "give"


def _noun_phrases(items: list[str]) -> bool:
    """Whether ``items`` are two or more, each a noun phrase (a determiner first, or a deliverable noun)."""
    return len(items) >= 2 and all(_NOUN_PHRASE.match(i) or _BARE_DELIVERABLE.match(i) for i in items)


def _request_inside(sentence: str) -> list[Aspect]:
    """The instruction after a comma in ``sentence``, when what comes before it only sets the scene.

    Two ways a request sits mid-sentence: after a fronted phrase that gives the input or the setting ("Using
    sales.xlsx and fx_rates.csv, write a pandas script ...", "Given our Q3 budget vs actuals, write the
    commentary ..."), or after a clause about the person, as a question ("My aunt has asked me to say a few
    words, so would you write me a toast ..."). The words before the comma are the aspect's context.
    """
    fronted = _FRONTED.match(sentence) is not None
    for at, comma in enumerate(_INNER_COMMA.finditer(sentence)):
        rest = sentence[comma.end() :]
        label = sentence[: comma.start()].split()
        if (
            at == 0
            and 2 <= len(label) <= 3
            and all(w.isalpha() and w.lower() not in VERBS for w in label)
            and not _PREPOSITION.match(" ".join(label))
            and comma.group(0) != ","  # "date,store,sales" is data
        ):
            # a label before the first comma ("Client holding, work out the return and draft a short note ...":
            # multipart_set5_first read no deliverable, and the note was a list of the wrong figures)
            request = _COLON.split(rest, maxsplit=1)[0]  # what follows its colon is the material
            if _first_word(request) in VERBS and (found := _sentence_aspects(request)):
                return [Aspect(a.text, a.verb, sentence[: comma.start()]) for a in found]
        if fronted or _INNER_REQUEST.match(rest):
            if found := _sentence_aspects(_INNER_REQUEST.sub("", rest, count=1) if not fronted else rest):
                return [Aspect(a.text, a.verb, sentence[: comma.start()]) for a in found]
    return []


def _counted_items(sentence: str) -> list[Aspect]:
    """The deliverables of a sentence that counts them and lists each by its letter or number, else none.

    "Then two queries: (a) everyone who reports to a given manager ...; (b) each person with at least one direct
    report ..." asks for two queries (multipart_set5_first: read as one aspect, one SQL block answered it and
    query (b) was missing with nothing said). The count must match the labels, which run in order from a or 1.
    """
    found = _COUNTED.match(sentence.strip())
    if found is None:
        return []
    noun = found.group("noun").lower()
    one = re.sub(r"ies$", "y", noun) if noun.endswith("ies") else re.sub(r"s$", "", noun)
    if not _NOUN.fullmatch(one):
        return []
    labels = list(_LETTER.finditer(found.group("items")))
    count = _COUNTS.get(found.group("count").lower()) or int(found.group("count"))
    expected = [chr(ord(labels[0].group("label").lower()) + i) for i in range(count)] if labels else []
    if len(labels) != count or labels[0].start() != 0 or [m.group("label").lower() for m in labels] != expected:
        return []
    if expected[0] not in ("a", "1"):
        return []
    items = found.group("items")
    ends = [m.start() for m in labels[1:]] + [len(items)]
    aspects = []
    for label, end in zip(labels, ends, strict=True):
        item = items[label.end() : end].strip().rstrip(";,.").strip()
        aspects.append(Aspect(f"write {one} ({label.group('label')}): {item}", "write"))
    return aspects


def _semicolon_requests(sentence: str) -> list[str]:
    """The items of a request with no object whose list runs on semicolons, each with the request's verb.

    "Could I get: tables for customers (...), their bikes, and repair jobs (...); a query that lists open jobs
    ...; and a short Python sqlite3 script that prints that list?" asks for three things (multipart_set3_first:
    planned as one slot, and the script was never written); the commas inside the first item are its own.
    """
    pieces = [p.strip().rstrip(".!?").strip() for p in _SEMICOLON.split(sentence)]
    head, *tail = _COLON.split(pieces[0], maxsplit=1)
    verb = _request_verb(head) if tail and len(pieces) >= 2 else None
    if verb is None:
        return []
    pieces = [tail[0], *(_AND.sub("", p) for p in pieces[1:])]
    items: list[str] = []
    for piece in pieces:
        if items and _ENUMERATOR.match(pieces[0]) and not _ENUMERATOR.match(piece):
            # "(2) bash script ... that ... prints how many it deleted; exit 0 on success; (3) systemd units ...":
            # a piece with no number of its own is more of the numbered item before it (multipart_set5_first
            # made "exit 0 on success" a part of its own)
            items[-1] = f"{items[-1]}; {piece}"
        else:
            items.append(piece)
    return [f"{verb} {_ENUMERATOR.sub('', item)}" for item in items if item]


def _semicolon_headlines(sentence: str) -> list[str]:
    """Deliverables named without a verb and listed on semicolons, each as an instruction to deliver it.

    "pandas script to merge the three monthly sales CSVs and compute margin per product; a short memo interpreting
    which products are dragging overall margin down" (planning_heldout12, read as one deliverable): every piece is
    headed by a deliverable and none is an instruction.
    """
    pieces = [_AND.sub("", p.strip().rstrip(".!?").strip()) for p in _SEMICOLON.split(sentence)]
    if len(pieces) < 2 or not all(_HEADLINE.match(p) and not _sentence_aspects(p) for p in pieces):
        return []
    return [f"deliver {p}" for p in pieces]


def _listed_after(before: str, piece: str) -> str:
    """``piece`` with the verb of the list ``before`` began, when it names a deliverable without a verb of its own.

    "...; pytest tests for it; and a README section showing how to use it": each piece is the list's next item.
    """
    bare = _AND.sub("", piece)
    found = _sentence_aspects(before)
    if found and _first_word(bare) not in VERBS and (_DELIVERABLE.match(bare) or _BARE_DELIVERABLE.match(bare)):
        return f"{found[-1].verb} {bare}"
    return piece


def _describes(part: str) -> bool:
    """Whether ``part`` says what the deliverable before it is like ("a toast, warm with some gentle teasing").

    It has no determiner, no deliverable noun, does not start with a verb, and is not headed by a file name to
    write ("the ini file and diskwatch.py with load_settings(path)": multipart_set4_first planned the two as one).
    """
    return (
        not re.match(_DETERMINER, part, re.I)
        and not _NOUN.search(part)
        and _first_word(part) not in VERBS
        and not _SOURCE_FILE.match(part)
    )


def _shares_noun(obj: str) -> bool:
    """``obj`` is "a" and one word that names no deliverable: the first of two coordinates of one noun."""
    one = _ONE_WORD_COORDINATE.match(obj)
    return one is not None and not _NOUN.fullmatch(one.group(1))


def _infinitive_open(clause: str) -> bool:
    """The clause holds an infinitive after its own verb ("a guide for a new developer to set up ...")."""
    return any(m.group(1).lower() in VERBS for m in _INFINITIVE.finditer(clause, len(clause.split()[0])))


def _listed_objects(head: str, listing: str) -> list[Aspect]:
    """Each listed thing, made by the head's verb ("Prepare a lesson: objectives, an activity, and a quiz")."""
    found = _sentence_aspects(head)
    parts: list[str] = []
    for part in (p.strip() for p in _PARTS.split(listing)):
        if parts and _PREPOSITION.match(part):
            parts[-1] = f"{parts[-1]} {part}"  # "..., showing each step" qualifies the item before it
        elif part:
            parts.append(part)
    if any(not p[0].isalpha() for p in parts):
        return []  # a formula or a number, not a list of things to make
    if parts and (_SUBJECT.match(parts[0]) or all(_CLAUSE.match(p) or _TOPIC.match(p) for p in parts)):
        return []  # "Write release notes: it adds shared lists, the crash is fixed ...": what to say, not to make
    noun = deliverable_noun(found[0]) if len(found) == 1 else None
    if noun and noun not in COMPOSITE_NOUNS and not all(_DELIVERABLE.match(p) for p in parts):
        return []  # "a docker-compose file ...: a Node API, PostgreSQL 16 and Redis": the parts of one thing
    if len(found) != 1 or len(parts) < 2 or found[0].verb in JOINT_VERBS or _GIVEN.search(head):
        return []  # one thing, a choice among the listed ("decide between: ..."), or given material
    verb = found[0].verb
    return [Aspect(f"{verb} {part}", verb) for part in parts]


def _first_word(text: str) -> str:
    match = re.match(r"[A-Za-z'-]+(?![\w(])", text)  # "parse_duration(text) -> int" starts with no verb
    return match.group(0).lower() if match else ""
