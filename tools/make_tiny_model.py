"""Write a tiny random llama-architecture GGUF model that llama-server can load offline.

2 layers, 64 wide, 4 heads, f32, an SPM vocabulary with the 256 byte tokens, ChatML
control tokens and template, weights from a fixed seed: the same seed gives the same
bytes. The output rows of every control, byte and unknown token are zero except the
EOS / end-of-turn token ``<|im_end|>``, whose random row is scaled by
``EOS_OUTPUT_SCALE``: greedy decoding emits word pieces until EOS wins, so most replies
stop by themselves (``finish_reason`` "stop"). With seed 0 and the prompts of
``find_flip_prompt.py``, 128 tokens allowed, about 85 % of replies stop, after 3 to
~100 tokens (median ~40); about 12 % still hit the cap.

Usage: ``python tools/make_tiny_model.py OUT.gguf [--seed N]`` (default seed 0, the one
``tests/fixtures/llama_prompts.json`` was searched with).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gguf
import numpy as np

N_LAYERS = 2
N_EMBD = 64
N_HEADS = 4
N_FF = 128
CONTEXT_LENGTH = 512
RMS_EPS = 1e-5
ROPE_THETA = 10000.0
# Scale of the EOS output row. The switch from "never stops" to "stops at once" is sharp:
# measured over 40 prompts at 128 max tokens, 1.2 stops 5, 1.4 stops 27 (median ~45
# tokens), 1.5 stops 35 (median ~40), 2.0 stops 39 but most after 3 tokens.
EOS_OUTPUT_SCALE = 1.5

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Word pieces: common English words (with the SPM word-start marker) and letters, so
# prompts made of these words tokenize into word pieces, not bytes.
WORDS_TEXT = (
    "the of and to in is was for on that with as by at from his her it an are were be "
    "this which or had not but have they one all their has been also its new who more "
    "first two after into other some time over most years only than can may many when "
    "where there would about these what out up city world state people cache warm cold "
    "prompt token model server answer question light river stone house green blue red "
    "north south east west small large old young long short fast slow early late open "
    "system user assistant hello please tell write story across number"
)
WORDS: tuple[str, ...] = tuple(WORDS_TEXT.split())
LETTERS = "abcdefghijklmnopqrstuvwxyz"
PUNCTUATION = (".", ",", "?", "!", ":", "'")

SPECIAL_TOKENS: tuple[tuple[str, gguf.TokenType], ...] = (
    ("<unk>", gguf.TokenType.UNKNOWN),
    ("<s>", gguf.TokenType.CONTROL),
    ("</s>", gguf.TokenType.CONTROL),
    ("<|im_start|>", gguf.TokenType.CONTROL),
    ("<|im_end|>", gguf.TokenType.CONTROL),
)


def build_vocab() -> tuple[list[str], list[float], list[int]]:
    """Return tokens, scores and token types of the SPM vocabulary."""
    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    for text, token_type in SPECIAL_TOKENS:
        tokens.append(text)
        scores.append(0.0)
        types.append(int(token_type))
    for byte in range(256):
        tokens.append(f"<0x{byte:02X}>")
        scores.append(0.0)
        types.append(int(gguf.TokenType.BYTE))
    pieces = ["\u2581", *LETTERS, *(f"\u2581{c}" for c in LETTERS), *PUNCTUATION]
    pieces += [f"\u2581{word}" for word in WORDS]
    seen: set[str] = set()
    for piece in pieces:
        if piece in seen:
            continue
        seen.add(piece)
        tokens.append(piece)
        # SPM merges prefer higher scores: longer pieces win over their letters.
        scores.append(float(len(piece)))
        types.append(int(gguf.TokenType.NORMAL))
    return tokens, scores, types


def _random_weights(rng: np.random.Generator, n_vocab: int) -> dict[str, np.ndarray]:
    def matrix(rows: int, cols: int) -> np.ndarray:
        # numpy shape (rows, cols) is ggml ne = [cols, rows]: rows outputs of cols inputs.
        weights: np.ndarray = rng.standard_normal((rows, cols)) / np.sqrt(cols)
        return weights.astype(np.float32)

    def norm(size: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(size)).astype(np.float32)

    tensors: dict[str, np.ndarray] = {
        "token_embd.weight": rng.standard_normal((n_vocab, N_EMBD)).astype(np.float32),
    }
    for layer in range(N_LAYERS):
        prefix = f"blk.{layer}"
        tensors[f"{prefix}.attn_norm.weight"] = norm(N_EMBD)
        tensors[f"{prefix}.attn_q.weight"] = matrix(N_EMBD, N_EMBD)
        tensors[f"{prefix}.attn_k.weight"] = matrix(N_EMBD, N_EMBD)
        tensors[f"{prefix}.attn_v.weight"] = matrix(N_EMBD, N_EMBD)
        tensors[f"{prefix}.attn_output.weight"] = matrix(N_EMBD, N_EMBD)
        tensors[f"{prefix}.ffn_norm.weight"] = norm(N_EMBD)
        tensors[f"{prefix}.ffn_gate.weight"] = matrix(N_FF, N_EMBD)
        tensors[f"{prefix}.ffn_up.weight"] = matrix(N_FF, N_EMBD)
        tensors[f"{prefix}.ffn_down.weight"] = matrix(N_EMBD, N_FF)
    tensors["output_norm.weight"] = norm(N_EMBD)
    tensors["output.weight"] = (4.0 * matrix(n_vocab, N_EMBD)).astype(np.float32)
    return tensors


def write_tiny_model(path: Path, seed: int = 0) -> None:
    """Write the tiny model to ``path``; the same seed always gives the same bytes."""
    tokens, scores, types = build_vocab()
    rng = np.random.default_rng(seed)
    tensors = _random_weights(rng, len(tokens))
    eos = tokens.index("<|im_end|>")
    unreachable = [i for i, t in enumerate(types) if t != int(gguf.TokenType.NORMAL) and i != eos]
    tensors["output.weight"][unreachable, :] = 0.0
    # EOS keeps its random row, scaled, so it wins greedy decoding in some states.
    tensors["output.weight"][eos, :] *= EOS_OUTPUT_SCALE

    writer = gguf.GGUFWriter(path, "llama")
    writer.add_name(f"evidence-tiny-seed{seed}")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYERS)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEADS)
    writer.add_head_count_kv(N_HEADS)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    writer.add_rope_dimension_count(N_EMBD // N_HEADS)
    writer.add_rope_freq_base(ROPE_THETA)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(tokens.index("<unk>"))
    writer.add_bos_token_id(tokens.index("<s>"))
    writer.add_eos_token_id(tokens.index("<|im_end|>"))
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHATML_TEMPLATE)
    for name, array in tensors.items():
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="path of the .gguf file to write")
    parser.add_argument("--seed", type=int, default=0, help="weight seed (default: 0)")
    args = parser.parse_args(argv)
    write_tiny_model(args.out, seed=args.seed)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
