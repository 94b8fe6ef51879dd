"""Is every fact of an older README.md stated in today's README.md and docs/? Sentences, code lines, table rows.

    python tools/docs_coverage.py REV       # REV: a commit whose README.md held the whole manual

Each sentence of prose (links read as their text), each line of a code block, each table row and
heading of README.md at REV must occur in README.md + docs/*.md (whitespace aside); each option of the
old "Options at a glance" table must be a row of its command's options table in docs/. Prints what is
missing (text that was rewritten on purpose shows up too: read the list), exits 1 if anything is.
"""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
if len(sys.argv) != 2:
    sys.exit(__doc__)
old = subprocess.run(["git", "-C", str(root), "show", f"{sys.argv[1]}:README.md"],
                     capture_output=True, text=True, check=True).stdout
pages = {p.name if p.parent == root else f"docs/{p.name}": p.read_text() for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))]}
new = "\n".join(pages.values())

def norm(s: str) -> str:
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)  # a link reads as its text
    # the old README's cross-references ("see "Filters"") are links to pages now
    s = s.replace('"Big reports"', "Big reports").replace('"Filters"', "Filters").replace('"Languages"', "Languages")
    s = s.replace('"Why here?"', "Why here?").replace("JSON below", "JSON").replace('"Big\nreports"', "Big reports")
    return " ".join(s.split())

new_norm = norm(new)
new_lines = {l.rstrip() for l in new.splitlines()}
missing, counts = [], {"sentence": 0, "code line": 0, "table row": 0, "heading": 0, "option": 0}

blocks = re.split(r"(^```.*?^```)", old, flags=re.DOTALL | re.MULTILINE)
for block in blocks:
    if block.startswith("```"):
        for line in block.splitlines()[1:-1]:
            if line.strip():
                counts["code line"] += 1
                if line.rstrip() not in new_lines:
                    missing.append(("code line", line))
        continue
    # tables
    glance = False
    prose = []
    for line in block.splitlines():
        if line.startswith("#"):
            counts["heading"] += 1
            text = line.lstrip("#").strip()
            if not any(l.lstrip("#").strip().startswith(text.split(":")[0]) for l in new.splitlines() if l.startswith("#")):
                missing.append(("heading", line))
        elif line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if set(cells[0]) <= set("- "):
                continue
            if cells[0].startswith("`placement"):
                # a row of the old glance table: each option in the command's own options table
                command = cells[0].strip("`").split()
                page = pages["docs/README.md"] if len(command) == 1 else pages[f"docs/{command[1]}.md"]
                for item in re.findall(r"`[^`]*`", cells[1]):
                    counts["option"] += 1
                    if f"| {item} |" not in page:
                        missing.append(("option", f"{cells[0]} {item}"))
                continue
            counts["table row"] += 1
            if norm(line) not in new_norm:
                missing.append(("table row", line))
        else:
            prose.append(line)
    text = "\n".join(prose)
    for para in re.split(r"\n\s*\n|\n(?=- )", text):
        para = norm(para)
        para = para.removeprefix("- ")
        for sentence in re.split(r"(?<=[.;:!?])\s+(?=[A-Z`(\[*])", para):
            sentence = sentence.strip()
            if not sentence:
                continue
            counts["sentence"] += 1
            if sentence not in new_norm:
                missing.append(("sentence", sentence))

print("checked:", counts, "total", sum(counts.values()))
print("missing:", len(missing))
for kind, what in missing:
    print(f"  {kind}: {what}")
sys.exit(1 if missing else 0)
