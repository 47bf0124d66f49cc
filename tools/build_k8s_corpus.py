"""Build the vendored corpus of real Kubernetes manifests from two Apache-2.0 repositories.

    python tools/build_k8s_corpus.py --examples GITDIR --gke GITDIR --out treepe_nb/data/k8s

`--examples` is a git directory of kubernetes/examples and `--gke` one of
GoogleCloudPlatform/kubernetes-engine-samples (bare or not: only `git --git-dir` is used, no work tree). The tree at
`HEAD` of each is read (`--examples-rev` / `--gke-rev` pick another commit).

The rules:

* Files: every regular file of the tree whose name ends in `.yaml` or `.yml` (case-insensitive), read as UTF-8.
  A file that is not UTF-8, or that PyYAML (`yaml.safe_load_all`) cannot parse as a whole, is skipped whole; a
  parse failure is counted as a template when the file contains `{{` (Helm / Go / Jinja markers), as a plain parse
  error otherwise.
* Documents: the file is cut at its separator lines (`---`, alone or followed by a comment). The text before the
  first separator is a document only when it holds something other than blank and comment lines; the text after
  each separator is always one (it may be empty). Each piece is parsed on its own and must give the same value as
  `safe_load_all` on the whole file (else the script stops), so a document's index is its index in
  `safe_load_all`.
* A document is kept when it parses into a mapping whose top level has `apiVersion` and `kind`, both strings.
  Otherwise it is skipped as "empty document" (nothing but comments), "not a mapping" (a list or a scalar) or
  "mapping without apiVersion and kind" (kustomize patches, Helm values, CI configs, ...). The rule is mechanical:
  a document with `{{ }}` inside a string value (a placeholder or an embedded chat template) that parses and has
  both keys is kept.
* Duplicates: two kept documents are the same when their parsed values are equal, compared as a canonical JSON dump
  (sorted keys; non-string keys, timestamps and binary values tagged so that they cannot collide with strings).
  Documents are visited in a stable order (kubernetes/examples, then kubernetes-engine-samples; paths in sorted
  order; documents in file order) and only the first occurrence is kept.
* Output, under `--out`: `SOURCE_NAME/ORIGINAL_PATH` for every file with a kept document (SOURCE_NAME is
  `kubernetes-examples` or `kubernetes-engine-samples`), holding the text of its kept documents exactly as it
  stands between the separators of the original, joined with `---` lines; `SOURCES.tsv` (one row per kept
  document); `README.md` (the rules, the counts, the commits); `LICENSE-kubernetes-examples` and
  `LICENSE-kubernetes-engine-samples` (each repository's `LICENSE`, unchanged). The two SOURCE_NAME folders are
  removed and rewritten; other files under `--out` are left alone. Every written file is read back and checked to
  parse into exactly its kept documents.

The script stops (exit status 1, a message naming the problem) on a missing git directory, a failing git command,
a `LICENSE` that is not the Apache License 2.0, a document split that disagrees with PyYAML, a write that does not
read back, or a corpus over `--max-bytes` (5 MB by default; nothing is written then).
"""
from __future__ import annotations

import argparse
import base64
import datetime
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

LICENCE = "Apache-2.0"
SOURCES = [  # (command-line option, repository, folder name in the corpus, licence file in the corpus)
    ("examples", "kubernetes/examples", "kubernetes-examples", "LICENSE-kubernetes-examples"),
    ("gke", "GoogleCloudPlatform/kubernetes-engine-samples", "kubernetes-engine-samples",
     "LICENSE-kubernetes-engine-samples"),
]
YAML_NAME = re.compile(r"\.ya?ml$", re.IGNORECASE)
SEPARATOR = re.compile(r"---[ \t]*(#.*)?")
TSV_COLUMNS = ["repository", "commit", "path", "document", "licence", "kind", "apiVersion", "vendored"]

SKIP_NOT_UTF8 = "file not UTF-8"
SKIP_TEMPLATE = "file does not parse, has {{ }} template markers"
SKIP_PARSE = "file does not parse (YAML error)"
SKIP_EMPTY = "empty document"
SKIP_NOT_MAPPING = "not a mapping"
SKIP_NO_KIND = "mapping without apiVersion and kind"
FILE_REASONS = [SKIP_NOT_UTF8, SKIP_TEMPLATE, SKIP_PARSE]
DOCUMENT_REASONS = [SKIP_EMPTY, SKIP_NOT_MAPPING, SKIP_NO_KIND]


class BuildError(Exception):
    """A problem that stops the build; its message is printed."""


@dataclass
class Document:
    repository: str
    commit: str
    path: str
    index: int           # index in yaml.safe_load_all of the whole file
    text: str            # the text between its separators, unchanged
    value: object        # the parsed value


def git(git_dir: Path, *args: str) -> bytes:
    """Run git on a git directory and return its standard output."""
    command = ["git", "--git-dir", str(git_dir), *args]
    result = subprocess.run(command, capture_output=True)
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", "replace").strip()
        raise BuildError(f"{' '.join(command)} failed: {message}")
    return result.stdout


def yaml_blobs(git_dir: Path, commit: str) -> list[tuple[str, str]]:
    """(path, blob id) of the regular files named *.yaml / *.yml in the tree of `commit`, sorted by path."""
    listing = git(git_dir, "ls-tree", "-r", "-z", commit).decode("utf-8")
    blobs = []
    for entry in listing.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, blob = meta.split()
        if kind != "blob" or mode not in ("100644", "100755"):
            continue
        if YAML_NAME.search(path):
            blobs.append((path, blob))
    return sorted(blobs)


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its "\\n" (only "\\n" ends a line; a "\\r" stays in its line)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def is_separator(line: str) -> bool:
    return SEPARATOR.fullmatch(line.rstrip("\n").rstrip("\r")) is not None


def has_content(lines: list[str]) -> bool:
    """Whether some line is neither blank nor a comment."""
    for line in lines:
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return True
    return False


def document_texts(text: str) -> list[str]:
    """The text of each YAML document of `text`, in order, as PyYAML counts documents."""
    pieces: list[list[str]] = [[]]
    for line in split_lines(text):
        if is_separator(line):
            pieces.append([])
        else:
            pieces[-1].append(line)
    texts = ["".join(piece) for piece in pieces[1:]]
    if has_content(pieces[0]):
        texts.insert(0, "".join(pieces[0]))
    return texts


def canonical(value: object) -> object:
    """`value` made JSON-ready without losing distinctions: non-string keys, timestamps, bytes and sets tagged."""
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if isinstance(key, str):
                name = key
            else:
                name = f"!{type(key).__name__}:{json.dumps(canonical(key), sort_keys=True)}"
            result[name] = canonical(item)
        return result
    if isinstance(value, list):
        return [canonical(item) for item in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return {"!timestamp": value.isoformat()}
    if isinstance(value, bytes):
        return {"!binary": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (set, frozenset)):
        return {"!set": sorted(json.dumps(canonical(item), sort_keys=True) for item in value)}
    return value


def canonical_json(value: object) -> str:
    return json.dumps(canonical(value), sort_keys=True, ensure_ascii=False)


def is_manifest(value: object) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("apiVersion"), str)
            and isinstance(value.get("kind"), str))


def skip_reason(value: object) -> str | None:
    """Why a parsed document is not kept, or None when it is."""
    if value is None:
        return SKIP_EMPTY
    if not isinstance(value, dict):
        return SKIP_NOT_MAPPING
    if not is_manifest(value):
        return SKIP_NO_KIND
    return None


def read_file(repository: str, commit: str, path: str, data: bytes, counts: Counter) -> list[Document]:
    """The documents of one file (all of them, kept or not); counts the files skipped whole."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        counts[SKIP_NOT_UTF8] += 1
        return []
    try:
        values = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        counts[SKIP_TEMPLATE if "{{" in text else SKIP_PARSE] += 1
        return []
    texts = document_texts(text)
    if len(texts) != len(values):
        raise BuildError(f"{repository}:{path}: cut into {len(texts)} documents, PyYAML reads {len(values)}")
    documents = []
    for index, (piece, value) in enumerate(zip(texts, values)):
        try:
            alone = yaml.safe_load(piece)
        except yaml.YAMLError as error:
            raise BuildError(f"{repository}:{path}: document {index} does not parse on its own: {error}") from error
        if canonical_json(alone) != canonical_json(value):
            raise BuildError(f"{repository}:{path}: document {index} parses differently on its own")
        documents.append(Document(repository, commit, path, index, piece, value))
    return documents


def check_licence(repository: str, text: str) -> None:
    if "Apache License" not in text or "Version 2.0, January 2004" not in text:
        raise BuildError(f"{repository}: LICENSE is not the Apache License 2.0")


def tsv_field(text: str) -> str:
    if "\t" in text or "\n" in text or "\r" in text:
        raise BuildError(f"a tab or a line break in a SOURCES.tsv field: {text!r}")
    return text


def join_documents(documents: list[Document]) -> str:
    """The kept documents of one file, joined with `---` lines."""
    parts = []
    for number, document in enumerate(documents):
        text = document.text
        if number < len(documents) - 1 and not text.endswith("\n"):
            text += "\n"
        parts.append(text)
    return "---\n".join(parts)


def readme(stats: dict, kinds: Counter, commits: dict[str, str]) -> str:
    lines = [
        "# Real Kubernetes manifests",
        "",
        "Kubernetes manifests copied from two Apache-2.0 repositories, for testing the YAML models on real files.",
        "Each file `SOURCE/PATH` holds the kept YAML documents of the file `PATH` of that repository, each exactly",
        "as its text stands between the original's `---` separators, joined with `---` lines; documents that",
        "were not kept are left out, so a file may be shorter than its original (they are otherwise unchanged).",
        "`SOURCES.tsv` gives, for every kept document, its repository, commit, path, index in the original file",
        "(0-based), licence, `kind`, `apiVersion` and vendored file.",
        "",
        "| folder | repository | commit | licence |",
        "|---|---|---|---|",
    ]
    for _, repository, folder, licence_file in SOURCES:
        lines.append(f"| `{folder}` | {repository} | `{commits[repository]}` | {LICENCE} (`{licence_file}`) |")
    lines += [
        "",
        "Built by `tools/build_k8s_corpus.py` (its docstring has the rules in full):",
        "",
        "- read every `*.yaml` / `*.yml` file of each repository's tree; a file that does not parse is skipped whole;",
        "- keep a document only when `yaml.safe_load` gives a mapping with string `apiVersion` and `kind`",
        "  (templates and kustomize patches fail this rule when they are not valid YAML or lack the two keys);",
        "- drop a document whose parsed value (canonical JSON, sorted keys) equals that of an earlier kept one",
        "  (order: kubernetes/examples, then kubernetes-engine-samples; paths sorted; documents in file order).",
        "",
        "## Counts",
        "",
        "| | " + " | ".join(folder for _, _, folder, _ in SOURCES) + " | all |",
        "|---|" + "---:|" * (len(SOURCES) + 1),
    ]
    rows = [("YAML files read", "files"), ("files with a kept document", "files_kept"),
            ("documents read (in files that parse)", "documents"), ("documents kept", "kept"),
            ("duplicates dropped", "duplicates")]
    rows += [(f"files skipped: {reason}", reason) for reason in FILE_REASONS]
    rows += [(f"documents skipped: {reason}", reason) for reason in DOCUMENT_REASONS]
    for label, key in rows:
        values = [stats[folder][key] for _, _, folder, _ in SOURCES]
        cells = " | ".join(str(value) for value in values)
        lines.append(f"| {label} | {cells} | {sum(values)} |")
    lines += ["", "Kept documents by `kind`:", "", "| kind | documents |", "|---|---:|"]
    top = kinds.most_common(15)
    for kind, count in top:
        lines.append(f"| {kind} | {count} |")
    other = sum(kinds.values()) - sum(count for _, count in top)
    lines.append(f"| other ({len(kinds) - len(top)} kinds) | {other} |")
    lines.append("")
    return "\n".join(lines)


def build(git_dirs: dict[str, Path], revisions: dict[str, str], out: Path, max_bytes: int) -> dict:
    documents: list[Document] = []
    stats: dict[str, Counter] = {}
    commits: dict[str, str] = {}
    licences: dict[str, bytes] = {}
    for option, repository, folder, _ in SOURCES:
        git_dir = git_dirs[option]
        if not git_dir.is_dir():
            raise BuildError(f"--{option}: no git directory at {git_dir}")
        commit = git(git_dir, "rev-parse", "--verify", f"{revisions[option]}^{{commit}}").decode().strip()
        commits[repository] = commit
        licence = git(git_dir, "show", f"{commit}:LICENSE")
        check_licence(repository, licence.decode("utf-8"))
        licences[repository] = licence
        counts = Counter()
        for path, blob in yaml_blobs(git_dir, commit):
            counts["files"] += 1
            found = read_file(repository, commit, path, git(git_dir, "cat-file", "blob", blob), counts)
            counts["documents"] += len(found)
            documents.extend(found)
        stats[folder] = counts

    folder_of = {repository: folder for _, repository, folder, _ in SOURCES}
    seen: set[str] = set()
    kept: list[Document] = []
    for document in documents:
        counts = stats[folder_of[document.repository]]
        reason = skip_reason(document.value)
        if reason is not None:
            counts[reason] += 1
            continue
        key = canonical_json(document.value)
        if key in seen:
            counts["duplicates"] += 1
            continue
        seen.add(key)
        counts["kept"] += 1
        kept.append(document)

    files: dict[str, list[Document]] = {}
    for document in kept:
        vendored = f"{folder_of[document.repository]}/{document.path}"
        files.setdefault(vendored, []).append(document)
    for vendored in files:
        stats[vendored.split("/", 1)[0]]["files_kept"] += 1

    contents = {vendored: join_documents(group).encode("utf-8") for vendored, group in files.items()}
    rows = ["\t".join(TSV_COLUMNS)]
    kinds = Counter()
    for vendored, group in files.items():
        for document in group:
            kinds[document.value["kind"]] += 1
            fields = [document.repository, document.commit, document.path, str(document.index), LICENCE,
                      document.value["kind"], document.value["apiVersion"], vendored]
            rows.append("\t".join(tsv_field(field) for field in fields))
    extra = {"SOURCES.tsv": ("\n".join(rows) + "\n").encode("utf-8"),
             "README.md": readme(stats, kinds, commits).encode("utf-8")}
    for _, repository, _, licence_file in SOURCES:
        extra[licence_file] = licences[repository]

    total = sum(len(data) for data in contents.values()) + sum(len(data) for data in extra.values())
    if total > max_bytes:
        raise BuildError(f"the corpus would take {total} bytes, over --max-bytes {max_bytes}; nothing written")

    out.mkdir(parents=True, exist_ok=True)
    for _, _, folder, _ in SOURCES:
        shutil.rmtree(out / folder, ignore_errors=True)
    for name, data in {**contents, **extra}.items():
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for vendored, group in files.items():
        values = list(yaml.safe_load_all((out / vendored).read_bytes().decode("utf-8")))
        expected = [canonical_json(document.value) for document in group]
        if [canonical_json(value) for value in values] != expected:
            raise BuildError(f"{out / vendored}: does not read back as its {len(group)} kept documents")
    return {"commits": commits, "stats": stats, "kinds": kinds, "bytes": total, "files": len(files)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=Path, required=True, help="git directory of kubernetes/examples")
    parser.add_argument("--gke", type=Path, required=True,
                        help="git directory of GoogleCloudPlatform/kubernetes-engine-samples")
    parser.add_argument("--examples-rev", default="HEAD", help="commit of kubernetes/examples (default HEAD)")
    parser.add_argument("--gke-rev", default="HEAD", help="commit of kubernetes-engine-samples (default HEAD)")
    parser.add_argument("--out", type=Path, required=True, help="corpus folder, e.g. treepe_nb/data/k8s")
    parser.add_argument("--max-bytes", type=int, default=5_000_000, help="refuse to write a larger corpus")
    args = parser.parse_args(argv)
    git_dirs = {"examples": args.examples, "gke": args.gke}
    revisions = {"examples": args.examples_rev, "gke": args.gke_rev}
    try:
        result = build(git_dirs, revisions, args.out, args.max_bytes)
    except BuildError as error:
        print(f"build_k8s_corpus: {error}", file=sys.stderr)
        return 1
    for repository, commit in result["commits"].items():
        print(f"{repository} {commit}")
    for folder, counts in result["stats"].items():
        print(folder, dict(sorted(counts.items())))
    print("kinds", dict(result["kinds"].most_common()))
    print(f"{result['files']} files, {result['bytes']} bytes written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
