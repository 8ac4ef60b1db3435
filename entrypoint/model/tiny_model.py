"""Deterministic tiny Qwen3-MoE checkpoint for the CPU engine: `make run` and the end-to-end tests.

Random weights (the text it writes is noise) but the real architecture vLLM serves on the H200:
a Qwen3-MoE with 8 experts, top-2 routing, a byte-level BPE tokenizer with a ChatML template.
Everything is derived from fixed seeds and a built-in corpus, so regenerating gives byte-identical
files (tests/entrypoint/model/test_tiny_model.py checks that), and nothing is downloaded.

    python -m entrypoint.model.tiny_model DEST   # writes DEST (about 1.3 MB) unless it is already complete
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Bump when anything below changes the generated files: ensure_tiny_model regenerates on mismatch.
GENERATOR_VERSION = "1"
MARKER = ".tiny-moe-version"

VOCAB_SIZE = 512
MAX_POSITIONS = 512
# Served context: small keeps the CPU KV cache (VLLM_CPU_KVCACHE_SPACE=1 GiB) far from full at
# 64 concurrent requests; written as serving.properties so the real settings loader reads it.
MAX_MODEL_LEN = 512
SEED = 1234

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

# ChatML, as Qwen's tokenizers write it; the generation prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Fixed training text for the tokenizer. Its content only has to cover common English letters,
# digits and punctuation so that prompts tokenize into a reasonable number of tokens.
_CORPUS_LINES = (
    "A mixture of experts routes every token to a few expert networks chosen by a small router.",
    "The quick brown fox jumps over the lazy dog while the model answers questions about serving.",
    "What is the capital of France? Paris is the capital of France and its largest city.",
    "Large language models generate text one token at a time, reading the prompt first.",
    "SageMaker sends requests to /invocations and checks /ping before traffic arrives.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 2026; symbols: , . ; : ! ? ' \" ( ) [ ] { } - + = / * _",
    "Hello, world! How are you today? I am fine, thank you. Tell me a story about a robot.",
    "The H200 has 141 GB of memory; FP8 weights halve the memory of a BF16 checkpoint.",
)
CORPUS = "\n".join(_CORPUS_LINES * 8)


def _build_tokenizer():  # -> transformers.PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        unk_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=MAX_MODEL_LEN,
    )


def _build_model(tokenizer):  # -> transformers.Qwen3MoeForCausalLM
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=64,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    )
    torch.manual_seed(SEED)
    model = Qwen3MoeForCausalLM(config)
    # Default init (std 0.02) gives near-uniform logits; a wider output head makes greedy
    # decoding pick distinct tokens, which keeps finish_reason/EOS tests meaningful.
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(SEED + 1))
    return model.to(torch.bfloat16).eval()


def generate(dest: Path) -> None:
    """Write the checkpoint to `dest` (created; must not exist or be empty)."""
    import torch

    torch.use_deterministic_algorithms(True)
    tokenizer = _build_tokenizer()
    model = _build_model(tokenizer)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest, safe_serialization=True)
    tokenizer.save_pretrained(dest)
    # Written next to the checkpoint so the settings loader finds it in the model directory,
    # exactly as it would find an LMI user's serving.properties.
    properties = [
        "# Written by entrypoint.model.tiny_model: the tiny MoE's served context.",
        f"option.max_model_len={MAX_MODEL_LEN}",
    ]
    (dest / "serving.properties").write_text("\n".join(properties) + "\n")
    (dest / MARKER).write_text(GENERATOR_VERSION + "\n")


def is_complete(dest: Path) -> bool:
    marker = dest / MARKER
    return marker.is_file() and marker.read_text().strip() == GENERATOR_VERSION


def ensure_tiny_model(dest: Path) -> Path:
    """Generate the tiny model into `dest` unless a complete copy of this version is there.

    Callers may run at once (make test's two pytest lanes, a test fixture and `make run`). An
    exclusive lock on a sibling file makes one of them generate while the others wait and then
    find the copy complete; without it, each would generate and replace the directory another had
    just returned. Generation happens in a sibling temporary directory renamed into place, so an
    interrupted run leaves no half-written checkpoint at `dest`.
    """
    dest = dest.resolve()
    if is_complete(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(dest.parent / f".{dest.name}.lock"):
        if is_complete(dest):  # made by the caller that held the lock before us
            return dest
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            generate(tmp)
            if dest.exists():
                shutil.rmtree(dest)  # an older generator version or an interrupted run
            os.rename(tmp, dest)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return dest


@contextmanager
def _exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `path` (created if missing); the kernel drops it if the process dies."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tree_digest(path: Path) -> str:
    """SHA-256 over every file's relative path and bytes: equal digests mean byte-identical trees."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", type=Path)
    args = parser.parse_args(argv)
    path = ensure_tiny_model(args.dest)
    config = json.loads((path / "config.json").read_text())
    print(f"tiny MoE at {path}: {config['model_type']}, sha256 {tree_digest(path)[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
