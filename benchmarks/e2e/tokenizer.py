"""A tokenizer for a random-weight benchmark model, so the real server runs with nothing switched off.

The bundled models are `config.json` files only (weights are random: `load_format=dummy`). The served
configuration needs a tokenizer: the API server detokenizes every streamed token, the LMI middleware sends
text prompts, and `--skip-tokenizer-init` would change what is measured. So each model gets a word-level
tokenizer over its whole vocabulary: token i is the word `w<i>`, words are split on whitespace, decoding joins
them with spaces. A prompt of N words is exactly N tokens, any id the model can emit decodes, and nothing is
downloaded. Written next to a copy of the model's config files in the benchmark's work folder, never into the
repository.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

MARKER = ".bench-tokenizer"
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['content'] + ' ' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'w1 ' }}{% endif %}"
)


def word(token_id: int) -> str:
    return f"w{token_id}"


def words(token_ids: list[int]) -> str:
    """The text whose tokens are exactly `token_ids`."""
    return " ".join(word(i) for i in token_ids)


def write_word_tokenizer(dest: Path, vocab_size: int, max_len: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {word(i): i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=word(0)))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token=word(0),
        eos_token=word(2),
        chat_template=CHAT_TEMPLATE,
        model_max_length=max_len,
    )
    fast.save_pretrained(dest)


def prepare_model_dir(model_dir: Path, work_dir: Path) -> Path:
    """A copy of the model's config files plus a word tokenizer, under work_dir; reused when already made."""
    config = json.loads((model_dir / "config.json").read_text())
    text_config = config.get("text_config") or {}
    vocab_size = int(config.get("vocab_size") or text_config.get("vocab_size"))
    max_len = int(config.get("max_position_embeddings") or text_config.get("max_position_embeddings") or 32768)
    dest = work_dir / "served-models" / model_dir.name
    stamp = f"{vocab_size}:{max_len}:{(model_dir / 'config.json').read_text()}"
    if (dest / MARKER).is_file() and (dest / MARKER).read_text() == stamp:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for path in model_dir.iterdir():
        if path.is_file() and path.suffix == ".json":
            shutil.copy2(path, dest / path.name)
    write_word_tokenizer(dest, vocab_size, max_len)
    (dest / MARKER).write_text(stamp)
    return dest
