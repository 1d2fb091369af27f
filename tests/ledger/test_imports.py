"""The ledger core stays light: importing it pulls in no ML stack, no HTTP client, no agent code."""

import subprocess
import sys


def test_ledger_import_pulls_in_no_heavy_or_agent_modules():
    code = (
        "import sys, omnidecision.ledger\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'torch', 'transformers', 'openai', 'trl', 'vllm',"
        " 'datasets', 'httpx'} or m.startswith(('omnidecision.agent', 'omnidecision.tools', 'omnidecision.sft',"
        " 'omnidecision.rl', 'omnidecision.tasks')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
