#!/usr/bin/env python3
"""Ask a person before deploying (the ``deploy-check`` skill).

Input: the task as JSON on stdin (``id`` is used). The script talks to Vigil
through the ``vigil`` command on PATH, as any command skill can, with the
``VIGIL_HOME`` and ``VIGIL_TASK_ID`` its run is given. Without an answer yet it
asks (``vigil task ask``: the task waits once this run ends); with one, it
reports it on its last line:

    {"status": "completed", "summary": "...", "detail": "..."}
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

QUESTION = "Deploy to staging or to prod?"


def vigil(program: str, *args: str) -> str:
    return subprocess.run([program, *args], check=True, capture_output=True, text=True).stdout


def main() -> int:
    task = json.load(sys.stdin)
    program = shutil.which("vigil")
    if program is None:
        print("deploy-check: the vigil command is not on PATH", file=sys.stderr)
        return 2
    task_id = str(task["id"])
    answer = json.loads(vigil(program, "task", "show", task_id, "--json")).get("answer")
    if not answer:
        vigil(program, "task", "ask", task_id, QUESTION, "--choice", "staging", "--choice", "prod")
        print(json.dumps({"status": "completed", "summary": f"asked: {QUESTION}"}))
        return 0
    summary = f"deploying to {answer}"
    print(json.dumps({"status": "completed", "summary": summary, "detail": f"a person answered {answer!r}"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
