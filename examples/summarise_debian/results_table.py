"""A markdown table of summarise.sh runs (their results.json), one row a variant, then the lead.

    python results_table.py OUT_DIR "name|KNOB=value|..." ...   (recipe_search.sh, recipe_choices.sh)
"""

import json
import sys
from pathlib import Path


def main():
    out = Path(sys.argv[1])
    print("| variant | changed | recipe (source words, merges, max-len-b) | updates | training s | valid ROUGE-L | "
          "test ROUGE-1/2/L F1 | test R-L 75-byte recall | rare words copied |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    lead = None
    for variant in sys.argv[2:]:
        name, *knobs = variant.split("|")
        path = out / name / "results.json"
        if not path.exists():
            continue
        r = json.loads(path.read_text())
        m, lead = r["model"], r["lead"]
        recipe = r.get("recipe", {})
        chosen = ", ".join(str(recipe.get(k, "–")) for k in ("source words", "BPE merges", "max-len-b"))
        print(f"| {name} | `{' '.join(knobs) or '–'}` | {chosen} | {r['updates']} | {r['train_seconds']} | "
              f"{r['valid_rougeL_f1']:.2f} | {m['rouge1_f1']:.2f}/{m['rouge2_f1']:.2f}/{m['rougeL_f1']:.2f} | "
              f"{m['rougeL_r75']:.2f} | {m['copy_rate']:.1f}% |")
    if lead:
        print(f"| lead | first sentence | – | – | – | – | {lead['rouge1_f1']:.2f}/{lead['rouge2_f1']:.2f}/"
              f"{lead['rougeL_f1']:.2f} | {lead['rougeL_r75']:.2f} | {lead['copy_rate']:.1f}% |")


if __name__ == "__main__":
    main()
