"""``beam-bpe train --source-weight / --source-field / --parity / --global-merges``: counts by source, exact weights,
parity-aware merges, per-source stats, and one clear line for every mistake."""

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest

import bpe
from tests.support.cli import IN_MEMORY, train
from tests.support.outputs import merges, stats, word_counts
from tests.support.real_text import man_pages, stdlib_sources

TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One jsonl file per language (a "lang" field in every record), and a text file of code."""
    root = tmp_path_factory.mktemp("languages")
    pages = man_pages(2)
    languages = {name: pages[name] for name in ("de", "ru", "ja") if name in pages}
    languages["en"] = stdlib_sources(2)
    for name, docs in languages.items():
        with open(root / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for doc in docs:
                for paragraph in doc.split("\n\n"):
                    f.write(json.dumps({"text": paragraph, "lang": name}, ensure_ascii=False) + "\n")
    return root


def source_table(output) -> dict[str, dict[bytes, int]]:
    """word_counts.parquet with its source column, as {source: {word: count}}."""
    table = pq.read_table(os.path.join(output, "word_counts.parquet"))
    assert table.schema.names == ["word", "count", "source"]
    by_source: dict[str, dict[bytes, int]] = {}
    for word, count, source in zip(*(table.column(name).to_pylist() for name in ("word", "count", "source"))):
        assert word not in by_source.setdefault(source, {}), "a (source, word) row appears twice"
        by_source[source][word] = count
    return by_source


def test_a_weight_of_3_gives_the_counts_and_merges_of_three_copies(corpus, tmp_path):
    weighted, field, copies = (str(tmp_path / name) for name in ("weighted", "field", "copies"))
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "600", "--output", weighted,
                 "--source-weight", "de.jsonl=3", *TWO_WORKERS) == 0
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "600", "--output", field,
                 "--source-field", "lang", "--source-weight", "de=3", *IN_MEMORY) == 0
    # The same file three times under other names, trained plainly.
    listed = tmp_path / "listed"
    shutil.copytree(corpus, listed)
    for copy in ("de-copy-1.jsonl", "de-copy-2.jsonl"):
        shutil.copyfile(corpus / "de.jsonl", listed / copy)
    assert train("--input", str(listed / "*.jsonl"), "--vocab-size", "600", "--output", copies, *IN_MEMORY) == 0

    three_times = word_counts(copies)
    by_file = source_table(weighted)
    assert sorted(by_file) == ["", "de.jsonl"]
    summed = {}
    for source, counts in by_file.items():
        for word, count in counts.items():
            summed[word] = summed.get(word, 0) + count * (3 if source == "de.jsonl" else 1)
    assert summed == three_times
    assert merges(weighted) == merges(field) == merges(copies)
    assert len(merges(copies)) == 600 - 256


def test_decimal_weights_train_on_the_exactly_scaled_counts(corpus, tmp_path):
    output = str(tmp_path / "out")
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "500", "--output", output,
                 "--source-field", "lang", "--source-weight", "en=0.25", "--source-weight", "ja=1.5",
                 "--min-frequency", "3", *IN_MEMORY) == 0
    table = source_table(output)
    assert sorted(table) == ["de", "en", "ja", "ru"]
    # Scale 4 makes every weight whole: en 1, ja 6, the rest 4; min-frequency 3 becomes 12.
    factor = {"en": 1, "ja": 6}
    scaled = {}
    for source, counts in table.items():
        for word, count in counts.items():
            scaled[word] = scaled.get(word, 0) + count * factor.get(source, 4)
    assert merges(output) == json.loads(bpe.train(scaled, 500, min_frequency=12).to_json())["model"]["merges"]
    s = stats(output)
    assert s["source_weight"] == ["en=0.25", "ja=1.5"] and s["source_field"] == "lang" and not s["parity"]
    en = s["sources"]["en"]
    assert en["weight"] == "0.25"
    assert en["bytes"] == sum(len(word) * count for word, count in table["en"].items())
    assert en["pieces"] == sum(table["en"].values()) and en["unique_pieces"] == len(table["en"])
    assert en["weighted_bytes"] == en["bytes"] / 4 and en["weighted_pieces"] == en["pieces"] / 4


def test_parity_trains_what_the_library_trains_and_says_so(corpus, tmp_path, capsys):
    output = str(tmp_path / "out")
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "700", "--output", output,
                 "--source-field", "lang", "--parity", *TWO_WORKERS) == 0
    table = source_table(output)
    expected = bpe.train(table, 700, parity=True)
    assert merges(output) == json.loads(expected.to_json())["model"]["merges"]
    assert merges(output) != json.loads(bpe.train(table, 700, weights={}).to_json())["model"]["merges"]
    err = capsys.readouterr().err
    assert "parity-aware training over 4 sources" in err
    assert "  source 'ja' (weight 1): " in err
    assert stats(output)["parity"] is True


def test_global_merges_trains_the_hybrid_variant_and_resumes_only_with_the_same_count(corpus, tmp_path, capsys):
    output = str(tmp_path / "out")
    args = ["--input", str(corpus / "*.jsonl"), "--vocab-size", "700", "--output", output, "--source-field", "lang",
            "--parity", *IN_MEMORY]
    assert train(*args, "--global-merges", "200") == 0
    table = source_table(output)
    expected = bpe.train(table, 700, parity=True, global_merges=200)
    assert merges(output) == json.loads(expected.to_json())["model"]["merges"]
    assert expected.merges[:200] == bpe.train(table, 456, weights={}).merges
    assert expected.merges != bpe.train(table, 700, parity=True).merges
    assert "parity-aware training (after 200 merges by the count over all) over 4 sources" in capsys.readouterr().err
    assert stats(output)["global_merges"] == 200
    # A checkpoint of the first 250 merges, as an interrupted run leaves it: it resumes with the
    # same --global-merges only, to the same merges.
    from pipeline.train.resume import CHECKPOINT_FILE, fingerprint
    os.remove(os.path.join(output, "tokenizer.json"))
    with open(os.path.join(output, CHECKPOINT_FILE), "w") as f:
        json.dump({"what": "beam-bpe merges checkpoint", "min_frequency": 2, "pattern": "gpt2", "tie_break": "bytes",
                   "word_counts": fingerprint(os.path.join(output, "word_counts.parquet")), "parity": True,
                   "global_merges": 200, "source_field": "lang", "source_weight": None, "vocab_size": 700,
                   "special_tokens": [], "merges": expected.merges[:250]}, f)
    assert train(*args, "--global-merges", "300", "--resume") == 2
    assert "made with --global-merges 200, not 300" in capsys.readouterr().err
    assert train(*args, "--global-merges", "200", "--resume") == 0
    assert merges(output) == json.loads(expected.to_json())["model"]["merges"]
    assert stats(output)["resumed_from_merges"] == 250


def test_min_word_count_applies_to_the_weighted_count_over_all_sources(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # " rare" 3 times at weight 0.5 (1.5) is dropped by --min-word-count 2; " half" 4 times (2) stays;
    # " both" once in each source (0.5 + 1) is dropped, " pair" twice in a and once in b (1 + 1) stays.
    (corpus / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in
                                            ["x rare rare rare", "x half half half half", "x both", "x pair pair"]))
    (corpus / "b.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ["x both", "x pair"]))
    output = str(tmp_path / "out")
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "260", "--output", output, "--min-word-count",
                 "2", "--source-weight", "a.jsonl=0.5", "--min-frequency", "1", *IN_MEMORY) == 0
    table = source_table(output)
    assert table == {"a.jsonl": {b"x": 4, b" half": 4, b" pair": 2}, "": {b"x": 2, b" pair": 1}}
    again = str(tmp_path / "again")  # the same rule when training from the table
    unpruned = str(tmp_path / "unpruned")
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "260", "--output", unpruned,
                 "--source-weight", "a.jsonl=0.5", "--min-frequency", "1", *IN_MEMORY) == 0
    assert train("--word-counts", os.path.join(unpruned, "word_counts.parquet"), "--vocab-size", "260",
                 "--output", again, "--min-word-count", "2", "--source-weight", "a.jsonl=0.5",
                 "--min-frequency", "1") == 0
    assert merges(again) == merges(output)


@pytest.mark.parametrize("flags, message", [
    (["--source-weight", "de.jsonl=0"], "--source-weight de.jsonl=0: weight '0' must be a positive number"),
    (["--source-weight", "de.jsonl=1.0005"], "has more than three decimal places"),
    (["--source-weight", "de.jsonl=two"], "weight 'two' is not a number"),
    (["--source-weight", "de.jsonl"], "expected PATTERN=W"),
    (["--source-weight", "fr*=2"], "--source-weight fr*=...: the pattern matches none of the 4 input files"),
    (["--source-weight", "*.jsonl=2", "--source-weight", "de*=3"], "matches both '*.jsonl' and 'de*'"),
    (["--source-weight", "de*=2", "--source-weight", "de*=3"], "--source-weight names 'de*' twice"),
    (["--parity"], "--parity needs sources"),
    (["--source-field", "lang", "--global-merges", "10"], "--global-merges needs --parity"),
    (["--source-field", "lang", "--parity", "--global-merges", "-1"], "--global-merges must be at least 0, not -1"),
    (["--source-field", "lang", "--parity", "--global-merges", "44"], "--global-merges 44 leaves no parity-aware merge"),
    (["--source-field", "lang", "--format", "text"], "is a text file, whose records have no fields"),
])
def test_source_mistakes_are_one_line_before_the_job(corpus, tmp_path, capsys, flags, message):
    output = tmp_path / "out"
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "300", "--output", str(output), *flags) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and message in err[0], err
    assert not output.exists()


def test_a_value_no_record_has_is_refused_before_training(corpus, tmp_path, capsys):
    output = tmp_path / "out"
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "300", "--output", str(output),
                 "--source-field", "lang", "--source-weight", "fr=2", *IN_MEMORY) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert err[-1] == ("beam-bpe train: error: --source-weight fr=...: nothing was counted for it "
                       "(no record has lang = 'fr')")
    assert not (output / "tokenizer.json").exists()


def test_resume_and_word_counts_refuse_other_sources(corpus, tmp_path, capsys):
    output = str(tmp_path / "out")
    args = ["--input", str(corpus / "*.jsonl"), "--vocab-size", "300", "--output", output, "--source-field", "lang"]
    assert train(*args, "--source-weight", "en=2", *IN_MEMORY) == 0
    capsys.readouterr()
    assert train(*args, "--source-weight", "en=3", "--resume", *IN_MEMORY) == 2
    # The finished tokenizer there is of another run: replaced only with --overwrite.
    assert capsys.readouterr().err.strip().endswith(
        "(--source-weight was en=2, now en=3); pass --overwrite to replace it, or choose another --output")
    table = os.path.join(output, "word_counts.parquet")
    for flags, said in [
        ([], "was counted with --source-field lang --source-weight en=2, not with no sources"),
        (["--source-field", "lang"], "not with --source-field lang:"),
    ]:
        assert train("--word-counts", table, "--vocab-size", "300", "--output", str(tmp_path / "w"), *flags) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
    again = str(tmp_path / "again")
    assert train("--word-counts", table, "--vocab-size", "300", "--output", again, "--source-field", "lang",
                 "--source-weight", "en=2") == 0
    assert merges(again) == merges(output)
    # A plain table cannot be trained by source.
    plain = str(tmp_path / "plain")
    assert train("--input", str(corpus / "*.jsonl"), "--vocab-size", "300", "--output", plain, *IN_MEMORY) == 0
    capsys.readouterr()
    assert train("--word-counts", os.path.join(plain, "word_counts.parquet"), "--vocab-size", "300", "--output",
                 str(tmp_path / "w2"), "--source-field", "lang", "--parity") == 2
    assert "was counted with no sources, not with --source-field lang" in capsys.readouterr().err


def test_a_parity_checkpoint_resumes_to_the_same_tokenizer(corpus, tmp_path):
    output = str(tmp_path / "out")
    args = ["--input", str(corpus / "*.jsonl"), "--vocab-size", "600", "--output", output, "--source-field", "lang",
            "--parity", *IN_MEMORY]
    assert train(*args) == 0
    full = merges(output)
    table = source_table(output)
    checkpoint = {"what": "beam-bpe merges checkpoint"}
    os.remove(os.path.join(output, "tokenizer.json"))
    # A checkpoint of the first 100 merges, as an interrupted run leaves it.
    from pipeline.train.resume import CHECKPOINT_FILE, fingerprint
    checkpoint.update({"word_counts": fingerprint(os.path.join(output, "word_counts.parquet")), "min_frequency": 2,
                       "pattern": "gpt2", "tie_break": "bytes", "parity": True, "source_field": "lang",
                       "source_weight": None, "vocab_size": 600, "special_tokens": [],
                       "merges": bpe.train(table, 356, parity=True).merges})
    with open(os.path.join(output, CHECKPOINT_FILE), "w") as f:
        json.dump(checkpoint, f)
    assert train(*args, "--resume") == 0
    assert merges(output) == full
    assert stats(output)["resumed_from_merges"] == 100


def test_a_pattern_matches_a_files_path_its_name_or_its_path_from_here(tmp_path, monkeypatch):
    import argparse

    from pipeline.train.sources import source_rule

    monkeypatch.chdir(tmp_path)
    files = [str(tmp_path / "web" / "en-0.jsonl"), str(tmp_path / "web" / "de-0.jsonl"), "gs://bucket/books/en.jsonl"]

    def rule(*weights):
        args = argparse.Namespace(source_weight=list(weights), source_field=None, parity=False, word_counts=None,
                                  format="auto")
        return source_rule(args, files)

    assert rule("en-*=2", "web/de*=0.5").files == {files[0]: "en-*", files[1]: "web/de*"}
    assert rule("*/books/*=3").files == {files[2]: "*/books/*"}
    assert rule("*/books/*=3").weights == {"*/books/*": 3000}
    assert rule("web/de*=0.5").weight_of("web/de*") == 500 and rule("web/de*=0.5").weight_of("") == 1000
