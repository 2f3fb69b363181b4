"""CPU seconds of the leak scan over a bundle's records, as verify's leaks check scans them.

    python tools/scan_time.py BUNDLE_DIR [--reply TEXT | --realistic] [--repeat N]

Reads every `records/**/*.json` of an unpacked bundle (the one `make bench` builds is put
aside in its scratch folder; any exported bundle will do), optionally adds TEXT to each
reply (`--realistic`: a paragraph of code, URLs, times, a percentage and HTML entities,
the kind of text that gives the scan escapes to decode), and prints the least CPU time of
`leaks.scan_documents` over all of them in N runs, the collector off as in verify. The
README's Benchmarks section quotes it for the 10,024-record bundle.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

from verifier import leaks

REALISTIC = """Here is the plan (about 95% done): see https://docs.python.org/3/library/re.html and
`/usr/lib/python3.11/re.py`. At 12:30:45 the job ran `make -j4 && ./run --threads=8 --seed 42`.
```python
def f(x):
    print("a\\tb\\n", x)  # 100% safe; a <= b && c >= d
    return {"key_count": 3, "token_ids": [1, 2, 3], "ratio": 0.5}
```
Contact support@example.com or visit http://localhost:8080/v1/models. Version 2.4.1-rc2,
C:\\\\Program Files\\\\App\\\\app.exe &amp; &lt;tag&gt; &#169; 2026. 2026-12-03T08:00:00Z, ::1.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    added = parser.add_mutually_exclusive_group()
    added.add_argument("--reply", default="", help="text added to each reply")
    added.add_argument("--realistic", action="store_true", help="add a paragraph of code")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    suffix = REALISTIC if args.realistic else args.reply
    documents = []
    for path in sorted((args.bundle / "records").rglob("*.json")):
        document = json.loads(path.read_bytes())
        response = document.get("response") or {}
        for choice in response.get("choices") or ():
            message = choice.get("message") or {}
            if isinstance(message.get("content"), str):
                message["content"] += suffix
        documents.append(document)
    gc.disable()
    best = float("inf")
    for _ in range(args.repeat):
        start = time.process_time()
        hits = sum(map(len, leaks.scan_documents(documents)))
        best = min(best, time.process_time() - start)
    print(f"{len(documents)} records, {hits} hits: {best:.3f} s of CPU (least of {args.repeat})")


if __name__ == "__main__":
    main()
