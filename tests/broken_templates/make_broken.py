import copy
import pathlib

import yaml

"""Regenerate the broken-template corpus from templates/dev/dev-hospital-01.yaml.

Run from the repository root: python tests/broken_templates/make_broken.py
Each file is one deliberate break; expected.yaml names the rule and field it must fail on.
"""
base = yaml.safe_load(open("templates/dev/dev-hospital-01.yaml"))
out = pathlib.Path("tests/broken_templates")
cases = []
def case(name, rule, field, fn=None, raw=None):
    cases.append((name, rule, field, fn, raw))
def fact(d, fid): return next(f for f in d["facts"] if f["id"] == fid)
# schema
case("missing-description", "schema", "description", lambda d: d.pop("description"))
case("bad-polarity-value", "schema", "facts[0].polarity", lambda d: fact(d, "F01").update(polarity=2))
case("unknown-role", "schema", "facts[0].role", lambda d: fact(d, "F01").update(role="misc"))
case("extra-field", "schema", "answer", lambda d: d.update(answer="helix"))
case("not-yaml", "schema", "<file>", raw="id: [unclosed\n  - : :\n")
# rule 4 structure
case("two-options", "rule 4", "options", lambda d: d["options"].pop(2) and [f.update(about="helix") for f in d["facts"] if f["about"] == "medora"])
case("correct-not-an-option", "rule 4", "correct_option", lambda d: d.update(correct_option="nobody"))
case("decoy-equals-correct", "rule 4", "decoy_option", lambda d: d.update(decoy_option="helix"))
case("eleven-facts", "rule 4", "facts", lambda d: d["facts"].pop())
case("role-id", "rule 4", "facts[0].id", lambda d: fact(d, "F01").update(id="decoy1"))
case("duplicate-id", "rule 4", "facts[1].id", lambda d: fact(d, "F02").update(id="F01"))
case("duplicate-text", "rule 4", "facts[1].text", lambda d: fact(d, "F02").update(text=fact(d, "F01")["text"]))
case("about-unknown-option", "rule 4", "facts[0].about", lambda d: fact(d, "F01").update(about="zeta"))
case("relevant-without-criterion", "rule 4", "facts[0].criterion", lambda d: fact(d, "F01").update(criterion=None))
case("unknown-criterion", "rule 4", "facts[0].criterion", lambda d: fact(d, "F01").update(criterion="comfort"))
case("irrelevant-with-criterion", "rule 4", "facts[2].criterion", lambda d: fact(d, "F03").update(criterion="cost"))
case("support-about-alternative", "rule 4", "facts[3].about", lambda d: fact(d, "F04").update(about="medora", text=fact(d,"F04")["text"].replace("Corvane Medical", "Medora Devices")))
case("decoy-wrong-polarity", "rule 4", "facts[4].polarity", lambda d: fact(d, "F05").update(polarity=1))
case("irrelevant-counts", "rule 4", "facts", lambda d: fact(d, "F03").update(polarity=-1))
# rules 1-3 need structure intact but scores wrong: impossible with the exact structure unless
# facts are irrelevant-tagged... construct by moving a relevant fact's criterion? Use a 4-option
# loader param instead: rules 1-3 are tested in test_templates with a hand-built Template.
case("rule1-correct-loses", "rule 1", "facts", lambda d: [fact(d, i).update(polarity=-1) for i in ("F02", "F06", "F09")])
case("rule2-decoy-group-no-decoy-win", "rule 2", "facts", lambda d: [fact(d, i).update(polarity=-1) for i in ("F01", "F08")])
case("rule3-support-group-tie", "rule 3", "facts", lambda d: (fact(d, "F09").update(polarity=-1), fact(d, "F05").update(polarity=1), fact(d, "F04").update(about="medora", polarity=1, text="Medora Devices sent an engineer within two hours after an emergency pump failure at a partner clinic in 2023.")))
# rule 5 hints
case("hint-best", "rule 5", "facts[1].text", lambda d: fact(d, "F02").update(text="Helix Infusion Systems pumps are the best choice for wards, logging 2 faults per 1,000 hours in trials."))
case("hint-description", "rule 5", "description", lambda d: d.update(description=d["description"] + " The committee should choose carefully."))
case("hint-decoy-word", "rule 5", "facts[0].text", lambda d: fact(d, "F01").update(text=fact(d, "F01")["text"] + " It is a decoy."))
case("hint-recommended", "rule 5", "facts[5].text", lambda d: fact(d, "F06").update(text="Helix Infusion Systems is recommended by the regional board for its forty-minute engineer response time."))
case("fact-names-no-option", "rule 5", "facts[2].text", lambda d: fact(d, "F03").update(text="The company sponsors a charity cycling race that passes the hospital's main entrance every September."))
case("fact-compares-options", "rule 5", "facts[1].text", lambda d: fact(d, "F02").update(text="Helix Infusion Systems pumps logged fewer alarm faults than Corvane Medical pumps in a year of trials."))
case("fact-names-wrong-option", "rule 5", "facts[2].text", lambda d: fact(d, "F03").update(text="Corvane Medical sponsors a charity cycling race that passes the hospital's main entrance every September."))
case("hint-winner-title", "rule 5", "title", lambda d: d.update(title="Pick the winner: infusion pumps"))
lines = []
for i, (name, rule, field, fn, raw) in enumerate(cases, 1):
    fn_ = f"{i:02d}-{name}.yaml"
    if raw is not None:
        text = raw
    else:
        d = copy.deepcopy(base); fn(d); d["id"] = f"broken-{name}"
        text = yaml.safe_dump(d, sort_keys=False, allow_unicode=True, width=200)
    (out / fn_).write_text(f"# deliberately broken: expected {rule} on field {field}\n" + text)
    lines.append({"file": fn_, "rule": rule, "field": field})
(out / "expected.yaml").write_text(yaml.safe_dump(lines, sort_keys=False))
print(len(cases))
