"""The modules docker_daemon_json and files, run in-process as Ansible runs them (their real argument handling),
on files in a temporary folder."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.dask_gpu.bundle.plugins.modules import docker_daemon_json, files


def run(module: ModuleType, capsys: pytest.CaptureFixture[str], **args: object) -> dict[str, object]:
    with patch_module_args(args), pytest.raises(SystemExit) as exited:
        module.main()
    result = dict(json.loads(capsys.readouterr().out))
    result["rc"] = exited.value.code
    return result


def test_daemon_json_is_merged_once_and_given_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    daemon = tmp_path / "docker" / "daemon.json"
    daemon.parent.mkdir()
    # The operator's own file, formatted by hand.
    daemon.write_text('{"labels": ["kept"], "log-driver": "journald"}')
    config = {"log-driver": "json-file", "features": {"cdi": True}}
    merged = run(docker_daemon_json, capsys, path=str(daemon), config=config)
    assert merged["rc"] == 0 and merged["changed"], merged
    assert json.loads(daemon.read_text()) == {"labels": ["kept"], "log-driver": "json-file", "features": {"cdi": True}}
    record = json.loads(Path(f"{daemon}.dask-bundle").read_text())
    assert record == {"log-driver": {"had": True, "value": "journald"}, "features": {"had": False, "value": None}}
    assert oct(daemon.stat().st_mode & 0o777) == "0o644"
    again = run(docker_daemon_json, capsys, path=str(daemon), config=config)
    assert not again["changed"] and not again["stale"], again
    # Formatted otherwise, same content: not rewritten.
    daemon.write_text(json.dumps(json.loads(daemon.read_text())))
    written = daemon.stat().st_mtime_ns
    assert not run(docker_daemon_json, capsys, path=str(daemon), config=config)["changed"]
    assert daemon.stat().st_mtime_ns == written
    restored = run(docker_daemon_json, capsys, path=str(daemon), state="restored")
    assert restored["changed"], restored
    assert json.loads(daemon.read_text()) == {"labels": ["kept"], "log-driver": "journald"}
    assert not Path(f"{daemon}.dask-bundle").exists()
    assert not run(docker_daemon_json, capsys, path=str(daemon), state="restored")["changed"]


def test_what_the_validating_program_refuses_is_never_written(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The validate command sees the merged content before any write: where it refuses, the task fails with its
    output and neither daemon.json nor the record changes; where it accepts, both are written; a command the host
    lacks checks nothing. (dockerd --validate, the command the docker_engine role passes, needs Docker 23: the
    sandbox's 20.10 has none, so it ran by hand on the gpuhost CPU host's dockerd 26.1.5 - tests/gpu/results/gpuhost/
    rehearsal-cpu.md.)"""
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{"userland-proxy": false}\n')
    checker = tmp_path / "check.py"
    checker.write_text("import json, sys\nbad = sorted(set(json.load(open(sys.argv[1]))) - {'userland-proxy', "
                       "'log-driver'})\nprint('unknown: ' + ', '.join(bad)) if bad else None\n"
                       "sys.exit(1 if bad else 0)\n")
    command = f"{sys.executable} {checker} %s"
    refused = run(docker_daemon_json, capsys, path=str(daemon), config={"log-opt": {"max-size": "5m"}},
                  validate=command)
    assert refused.get("failed") and "unknown: log-opt" in str(refused["msg"]), refused
    assert daemon.read_text() == '{"userland-proxy": false}\n' and not (tmp_path / "daemon.json.dask-bundle").exists()
    accepted = run(docker_daemon_json, capsys, path=str(daemon), config={"log-driver": "local"}, validate=command)
    assert accepted["changed"] and accepted["validated"], accepted
    assert json.loads(daemon.read_text()) == {"userland-proxy": False, "log-driver": "local"}
    missing = run(docker_daemon_json, capsys, path=str(daemon), config={"log-driver": "json-file"},
                  validate="no-such-dockerd --validate --config-file %s")
    assert missing["changed"] and not missing["validated"], missing


def test_a_daemon_json_that_is_not_json_is_refused_untouched(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{"labels": [')
    result = run(docker_daemon_json, capsys, path=str(daemon), config={"log-driver": "json-file"})
    assert result["rc"] == 1 and "is not valid JSON" in str(result["msg"]), result
    assert daemon.read_text() == '{"labels": [' and not Path(f"{daemon}.dask-bundle").exists()


def test_files_are_written_when_they_differ_and_contents_are_not_logged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "tls" / "host.key"
    crt = tmp_path / "tls" / "host.crt"
    owner = str(os.getuid())
    wanted = [{"path": str(key), "content": "SECRET KEY\n", "mode": "0600", "owner": owner, "group": owner},
              {"path": str(crt), "content": "CERT\n", "owner": owner, "group": owner}]
    first = run(files, capsys, files=wanted)
    assert first["changed"] and first["changed_paths"] == [str(key), str(crt)], first
    assert "SECRET KEY" not in json.dumps(first)
    assert key.read_text() == "SECRET KEY\n" and oct(key.stat().st_mode & 0o777) == "0o600"
    assert not run(files, capsys, files=wanted)["changed"]
    crt.chmod(0o666)
    fixed = run(files, capsys, files=wanted)
    assert fixed["changed_paths"] == [str(crt)] and oct(crt.stat().st_mode & 0o777) == "0o644", fixed
