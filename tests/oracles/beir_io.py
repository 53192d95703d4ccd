"""Reading BEIR folders the way spread's data/beir.h reads them, for the Python judges and peers."""
import json
import os


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def qrels_path(folder, name):
    """qrels/NAME.tsv; without a name, train.tsv when present, else the only .tsv there."""
    if name:
        return os.path.join(folder, "qrels", name + ".tsv")
    train = os.path.join(folder, "qrels", "train.tsv")
    if os.path.exists(train):
        return train
    (only,) = [f for f in os.listdir(os.path.join(folder, "qrels")) if f.endswith(".tsv")]
    return os.path.join(folder, "qrels", only)
