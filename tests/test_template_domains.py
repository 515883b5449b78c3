"""Decision domains are data (issue 52 item 7): the paper's 12 are the bundled default
(``resources/templates/domains.yaml``), and a ``domains.yaml`` in a template's folder or a folder above it adds a
domain of the user's own; a folder walk never takes it for a template."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from crossprofile_lib.design import DOMAINS
from crossprofile_lib.safety.inputs import TemplateError, template_paths
from crossprofile_lib.task.domains import domains_for, read_domains
from crossprofile_lib.task.templates import load_template, load_templates
from crossprofile_lib.task.validate import summary, validate_paths

ROOT = Path(__file__).resolve().parents[1]
HOSPITAL = ROOT / "templates" / "dev" / "dev-hospital-01.yaml"
OWN = "airport catering contract"


def _template(folder: Path, domain: str = OWN, name: str = "t.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    data = yaml.safe_load(HOSPITAL.read_text(encoding="utf-8"))
    data.update(id=f"own-{folder.name}-{name[:-5]}", domain=domain)
    p = folder / name
    p.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return p


def _domains(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "domains.yaml"
    p.write_text(yaml.safe_dump({"domains": list(names)}), encoding="utf-8")
    return p


def test_the_default_is_the_papers_twelve_read_from_the_bundled_file():
    bundled = ROOT / "templates" / "domains.yaml"
    assert read_domains(bundled) == DOMAINS and len(DOMAINS) == 12
    assert {"hospital equipment procurement", "school meal supplier", "bus route", "warehouse site"} <= set(DOMAINS)
    assert {t.domain for t in load_templates(ROOT / "templates" / "formal")} == set(DOMAINS)


def test_a_domain_outside_the_list_is_refused_and_the_message_says_how_to_add_it(tmp_path):
    p = _template(tmp_path / "mine")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    assert ei.value.rule == "schema (domain)" and ei.value.field == "domain"
    assert "domains.yaml" in str(ei.value) and OWN in str(ei.value)


def test_a_domains_file_beside_the_template_adds_a_domain(tmp_path):
    p = _template(tmp_path / "mine")
    _domains(tmp_path / "mine", OWN)
    assert load_template(p).domain == OWN
    assert domains_for(p) == frozenset(DOMAINS) | {OWN}


def test_a_domains_file_above_applies_and_a_sibling_folders_does_not(tmp_path):
    _domains(tmp_path / "root", OWN)
    assert load_template(_template(tmp_path / "root" / "a" / "b")).domain == OWN
    _domains(tmp_path / "other", "ferry operator")
    with pytest.raises(TemplateError):
        load_template(_template(tmp_path / "elsewhere", domain="ferry operator"))


def test_the_papers_domains_stay_valid_beside_a_domains_file(tmp_path):
    _domains(tmp_path / "mine", OWN)
    assert load_template(_template(tmp_path / "mine", domain="bus route")).domain == "bus route"


def test_an_edited_domains_file_is_read_again(tmp_path):
    p = _template(tmp_path / "mine")
    f = _domains(tmp_path / "mine", "ferry operator")
    with pytest.raises(TemplateError):
        load_template(p)
    f.write_text(yaml.safe_dump({"domains": ["ferry operator", OWN]}), encoding="utf-8")
    assert load_template(p).domain == OWN


def test_a_folder_walk_skips_the_domains_file_and_validate_counts_the_new_domain(tmp_path):
    _template(tmp_path / "mine")
    _domains(tmp_path / "mine", OWN)
    assert [p.name for p in template_paths(tmp_path / "mine")] == ["t.yaml"]
    verdicts = validate_paths(tmp_path / "mine")
    assert [v.ok for v in verdicts] == [True] and summary(verdicts) == "1 templates valid, 0 invalid (1 domains)"
    r = subprocess.run([sys.executable, "-m", "crossprofile_lib.cli", "validate", str(tmp_path / "mine")],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "1 templates valid, 0 invalid (1 domains)" in r.stdout + r.stderr


@pytest.mark.parametrize("body,field", [
    ("- just a list\n", "<file>"),
    ("domains: airport\n", "domains"),
    ("domains: []\n", "domains"),
    ("domains: [ok, 3]\n", "domains[1]"),
    ("domains: [ok, '<b>x</b>']\n", "domains[1]"),
    ("domains: [ok, ok]\n", "domains[1]"),
    ("domains: [ok]\nextra: 1\n", "<file>"),
])
def test_a_broken_domains_file_names_itself_the_field_and_the_rule(tmp_path, body, field):
    p = _template(tmp_path / "mine")
    (tmp_path / "mine" / "domains.yaml").write_text(body, encoding="utf-8")
    with pytest.raises(TemplateError) as ei:
        load_template(p)
    assert ei.value.rule == "domains file" and ei.value.field == field and "domains.yaml" in str(ei.value)
