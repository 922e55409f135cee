"""Safety routing: requests aimed at harming systems are flagged, and the policy decides what then.

What is flagged: malware (ransomware, keyloggers, stealers, backdoors...), credential theft
(stealing passwords, cookies or tokens, phishing kits), and attacks on systems the user does not
own (breaking in, exploiting or flooding someone else's server). Security words alone are not
enough: a keylogger *detector*, tests for an injection filter, or a secret scanner for one's own
repository are ordinary work. The rules look for intent: a harmful capability together with
stealth (undetectable, without the user knowing), a third party's system or account, or a
request to build the harmful thing itself with no defensive purpose in sight. Requests that
touch the subject but show no intent either way may go to an optional model check.

What then (the policy): `allow` (go on, but say it was flagged), `reroute:deep` (the deep model
answers, e.g. a hosted model with its own safeguards), or `refuse`. Every flagged request is a
`policy_decision` item, and the caller records it in the session log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

PolicyAction = Literal["allow", "reroute:deep", "refuse"]
ACTIONS: tuple[PolicyAction, ...] = ("allow", "reroute:deep", "refuse")


def parse_action(value: str) -> PolicyAction:
    """`value` as a policy action; ValueError naming the choices otherwise."""
    if value not in ACTIONS:
        raise ValueError(f"the policy must be allow, reroute:deep or refuse, not {value!r}")
    return value  # type: ignore[return-value]


def _rx(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(parts), re.I)


# Harmful capabilities, by category.
MALWARE = _rx(
    r"\bransomware\b",
    r"\bkey ?loggers?\b",
    r"\brootkits?\b",
    r"\btrojans?\b",
    r"\bbotnets?\b",
    r"\bspyware\b",
    r"\b(info|password|credential|cookie)[- ]?stealers?\b",
    r"\bremote access trojan\b",
    r"\bself[- ]replicating\b",
    r"\b(computer )?(worm|virus)(es)?\b(?! ?(scan|protect|total|check|definition))",
    r"\bbackdoors?\b",
    r"\bcrypto ?jack",
    r"\bmalware\b",
    r"\b(evade|evading|bypass\w*)\b.{0,20}\b(antivirus|anti-virus|edr|defender)\b",
    r"\bencrypts? (all )?(the |their |the victim'?s? )?(user'?s? )?files\b.{0,40}\b(ransom|bitcoin|pay)",
)
CREDENTIALS = _rx(
    r"\b(steal|stealing|harvest|harvesting|exfiltrat\w*|swipe|sniff|sniffing)"
    r"\b.{0,40}\b(passwords?|credentials?|logins?|cookies?|session tokens?|tokens?|api keys?|private keys?"
    r"|wallets?|2fa codes?|otp codes?|credit cards?)\b",
    r"\bphishing (page|site|kit|email|campaign|link)s?\b",
    r"\b(fake|clone|cloned|spoofed) (login|sign[- ]in) (page|form|site)\b",
    r"\b(dump|dumping)\b.{0,20}\b(lsass|sam database|credentials?|password hashes)\b",
    r"\bcrack\w*\b.{0,30}\b(password|wifi|wpa2?|account)\b",
)
INTRUSION = _rx(
    r"\bhack(ing)? into\b",
    r"\bbreak(ing)? into\b.{0,30}\b(account|server|system|network|computer|phone|email|database|site)",
    r"\b(gain|get)(ing)? (unauthori[sz]ed )?access to\b.{0,40}\b(account|server|system|network|computer|phone"
    r"|email|database|camera|webcam)\b",
    r"\bbypass\w*\b.{0,30}\b(login|authentication|2fa|mfa|paywall|license check)\b",
    r"\bexploit\w*\b.{0,60}\b(server|website|site|system|network|router|device|machine|host)s?\b",
    r"\b(ddos|dos attack|denial of service|flood)\w*\b.{0,40}\b(site|server|website|host|ip|network)\b",
    r"\bbrute[- ]?forc\w*\b.{0,40}\b(login|password|account|ssh|server)\b",
    r"\b(take over|takeover|hijack\w*)\b.{0,30}\b(account|session|server|device)\b",
    r"\breverse shell\b",
)
# Intent: hiding from the victim, or a target that is someone else's.
STEALTH = _rx(
    r"\bwithout (them|him|her|the (user|owner|victim|person|target)|anyone|people|the user'?s?)"
    r"( \w+)? (knowing|noticing|knowledge|consent|permission|finding out)\b",
    r"\bundetect(ed|able)\b",
    r"\b(evade|evading|bypass\w*|avoid\w*|hide from|disable\w*)\b.{0,20}\b(antivirus|anti-virus|av|edr"
    r"|defender|detection|security software|firewall logs?)\b",
    r"\bsilently (send|upload|exfiltrat\w*|email|forward)",
    r"\bcovertly\b",
    r"\b(hide|hidden) (itself|the process|from task manager)\b",
)
THIRD_PARTY = _rx(
    r"\bsomeone(?: else)?'?s\b",
    r"\b(other|another) (people|person|user)'?s?\b",
    r"\bmy (ex|neighbou?r|boss|coworker|co-worker|colleague|girlfriend|boyfriend|wife|husband|partner"
    r"|roommate|teacher|school|friend)('?s)?\b",
    r"\b(i|we) (don'?t|do not) own\b",
    r"\bnot (mine|ours|my own|our own)\b",
    r"\bwithout (authori[sz]ation|permission|consent)\b",
    r"\bunauthori[sz]ed\b",
    r"\b(the )?victims?'?s?\b",
    r"\b(target|targets)'s\b",
    r"\b(a|the) (company|competitor|government|bank|school|university)'?s? (server|network|site|website"
    r"|system|database)\b",
)
# Purpose: defending, testing, detecting, or working on one's own systems.
DEFENSIVE = _rx(
    r"\bdetect\w*\b",
    r"\bscanner\b",
    r"\bscan\w*\b.{0,30}\b(my|our|the) (own )?(code|repo|repository|project|codebase|files|network"
    r"|servers?)\b",
    r"\b(defend|defens\w*|protect\w*|prevent\w*|mitigat\w*|harden\w*|sanitiz\w*|escape|escaping|validat\w*"
    r"|rate[- ]limit\w*|lock ?out|throttl\w*)\b",
    r"\b(unit )?tests?\b",
    r"\btesting\b",
    r"\b(ctf|capture the flag|honeypot|yara|sigma rule|signature|intrusion detection|ids|waf)\b",
    r"\b(my|our) own\b",
    r"\b(audit\w*|patch\w*|fix\w*|review\w*|remediat\w*|vulnerability report)\b",
    r"\b(authori[sz]ed|with permission|in scope|our (own )?(app|api|server|site|network|systems?|code))\b",
    r"\bquarantin\w*|\bremov\w* (the )?(malware|virus|trojan|keylogger)\b",
)
BUILD = _rx(r"\b(write|build|create|make|code|develop|implement|generate|give me|craft|program)\b")


@dataclass
class Verdict:
    """What the checks found. `flagged` requests go to the policy; `ambiguous` ones may go to the model."""

    flagged: bool
    category: str = ""
    reason: str = ""
    rules: list[str] = field(default_factory=list)
    ambiguous: bool = False
    checked_by: Literal["rules", "model"] = "rules"


def check_rules(text: str) -> Verdict:
    """The rule check alone: intent, not keywords, decides."""
    found = {
        name: bool(rx.search(text))
        for name, rx in [
            ("malware", MALWARE),
            ("credential_theft", CREDENTIALS),
            ("intrusion", INTRUSION),
            ("stealth", STEALTH),
            ("third_party", THIRD_PARTY),
            ("defensive", DEFENSIVE),
            ("build", BUILD),
        ]
    }
    capabilities = [c for c in ("malware", "credential_theft", "intrusion") if found[c]]
    if not capabilities:
        return Verdict(False)
    category = capabilities[0]
    rules = [name for name, hit in found.items() if hit]
    what = category.replace("_", " ")
    if found["stealth"] or found["third_party"]:
        aim = (
            "hidden from its victim"
            if found["stealth"]
            else "aimed at a system or account that isn't the user's"
        )
        return Verdict(True, category, f"the request asks for {what} {aim}", rules)
    if found["defensive"]:
        return Verdict(False, category, f"{what} in a defensive or testing context", rules)
    if category == "credential_theft" or (category == "malware" and found["build"]):
        return Verdict(
            True, category, f"the request asks to build {what}, with no defensive purpose stated", rules
        )
    if category == "intrusion" and re.search(r"\b(hack(ing)? into|break(ing)? into)\b", text, re.I):
        return Verdict(
            True, category, "the request asks to break into a system not stated to be the user's", rules
        )
    return Verdict(False, category, f"mentions {what}, intent unclear", rules, ambiguous=True)


class ModelCheck(Protocol):
    """A second opinion from a model on a request the rules could not decide."""

    async def classify(self, text: str) -> tuple[bool, str]:
        """(harmful, reason in a few words)."""
        ...


CHECK_PROMPT = """\
You review requests sent to a coding assistant. A request is HARMFUL when it asks for malware, \
for stealing credentials, or for attacking or breaking into systems the requester does not own. \
Security work on one's own code (tests, detectors, scanners, fixes, hardening) is OK.
Answer with one word, HARMFUL or OK, then a short reason on the same line."""


class ChatModelCheck:
    """A `ModelCheck` over Chat Completions (`http` is a `whiz.client.HttpClient`, not closed here)."""

    def __init__(self, http, model: str | None = None):
        self.http = http
        self.model = model

    async def classify(self, text: str) -> tuple[bool, str]:
        body: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": CHECK_PROMPT},
                {"role": "user", "content": f"Request:\n{text[:4000]}"},
            ],
            "temperature": 0,
            "max_tokens": 40,
        }
        if self.model:
            body["model"] = self.model
        answer = await self.http.post("/chat/completions", body)
        reply = ((answer.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        word = reply.strip().split(maxsplit=1)
        harmful = bool(word) and word[0].strip(".:,").upper() == "HARMFUL"
        return harmful, (word[1] if len(word) > 1 else reply).strip()[:200]


@dataclass
class ScriptedCheck:
    """A `ModelCheck` for tests: fixed answers, in order; records what it was asked."""

    answers: list[tuple[bool, str]]
    asked: list[str] = field(default_factory=list)

    async def classify(self, text: str) -> tuple[bool, str]:
        self.asked.append(text)
        return self.answers.pop(0) if self.answers else (False, "no opinion")


@dataclass
class PolicyDecision:
    """What happens to a request: `action` is what the policy does with it (allow when not flagged)."""

    action: PolicyAction
    verdict: Verdict

    @property
    def flagged(self) -> bool:
        return self.verdict.flagged

    def item(self) -> dict[str, Any]:
        """The `policy_decision` item's fields."""
        v = self.verdict
        return {
            "action": self.action,
            "category": v.category,
            "reason": v.reason,
            "rules": v.rules,
            "checked_by": v.checked_by,
        }


class Policy:
    """Rules, then (for undecided requests, if configured) a model; flagged requests get `action`."""

    def __init__(self, action: PolicyAction = "refuse", model_check: ModelCheck | None = None):
        self.action = action
        self.model_check = model_check

    async def check(self, text: str) -> PolicyDecision:
        verdict = check_rules(text)
        if verdict.ambiguous and self.model_check is not None:
            harmful, why = await self.model_check.classify(text)
            if harmful:
                what = verdict.category.replace("_", " ")
                verdict = Verdict(True, verdict.category, f"the model check judged it {what}: {why}",
                                  verdict.rules, checked_by="model")  # fmt: skip
        return PolicyDecision(self.action if verdict.flagged else "allow", verdict)
