"""The formal proofs (`make formal`) as tests: every proof passes in every mode it lists, and a
harness made to misbehave fails, so the checks are not vacuous. Skipped, with the reason, where
the formal tools are not installed (`make setup-fpga` installs them; CI does)."""

import pytest

from atomcube.sim.formal import proofs, runner


def _tools_missing() -> str | None:
    try:
        runner._tool_dir()
    except runner.ToolsMissing as e:
        return str(e)
    return None


MISSING = _tools_missing()
needs_tools = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


def _run(proof, mode, tmp_path):
    harness, ports = proof.build()
    return runner.run(proof.name, harness, ports, mode, proof.depth, out=tmp_path)


@needs_tools
@pytest.mark.heavy
@pytest.mark.parametrize("proof,mode", [(p, mode) for p in proofs.PROOFS for mode in p.modes],
                         ids=lambda v: v.name if isinstance(v, proofs.Proof) else v)
def test_proof(proof, mode, tmp_path):
    outcome = _run(proof, mode, tmp_path)
    assert outcome.passed, f"{proof.name} {mode}: " + "; ".join(outcome.problems)


@needs_tools
@pytest.mark.parametrize("proof", proofs.MUTANTS, ids=lambda p: p.name)
def test_mutant_fails(proof, tmp_path):
    outcome = _run(proof, "bmc", tmp_path)
    assert not outcome.passed
    assert any("Assert failed" in line for line in outcome.problems), outcome.problems


@needs_tools
def test_broken_look_ahead_caught_by_the_design(tmp_path):
    """A reader that breaks its ready_next promise fails the SkidBuffer's own look-ahead check
    (hw.fabric.look_ahead), before any of the harness's queue checks."""
    outcome = _run(proofs.find("skid_promise_broken"), "bmc", tmp_path)
    failed = [line for line in outcome.problems if "Assert failed" in line]
    assert failed and all("hw/fabric.py" in line for line in failed), outcome.problems


def test_every_proof_covers():
    """Each proof checks its covers too, so no assumption hides what its assertions speak of."""
    for p in proofs.PROOFS:
        assert "bmc" in p.modes and "cover" in p.modes, p.name


def test_unknown_proof_named():
    with pytest.raises(KeyError, match="no proof named 'nope'"):
        proofs.find("nope")


def test_unknown_mode_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        runner.run("x", None, [], "induct", 5)
