"""What the renderer tests share: a `qevict eval` output directory of synthetic rows."""
import json
import os


def write_run(directory, rows, summary):
    """DIR/rows.jsonl (one row a line) and DIR/summary.json, as `qevict eval` writes them;
    returns DIR."""
    os.makedirs(directory)
    with open(os.path.join(directory, "rows.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(os.path.join(directory, "summary.json"), "w") as f:
        json.dump(summary, f)
    return directory
