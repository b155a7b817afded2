#!/usr/bin/env python3
"""Converts a specd Qwen3.5 checkpoint to a GGUF file that llama.cpp's `qwen35` loader reads.

    specd_to_gguf.py MODEL_DIR OUT.gguf [--outtype auto|f16|bf16|f32]

Used by tests/bench/llama_cpp_side_by_side.sh (which runs it in the venv that
scripts/setup_llama_cpp.sh makes: numpy and the gguf-py that ships with the same llama.cpp).

Why not llama.cpp's own convert_hf_to_gguf.py: it imports torch and transformers (AutoConfig) at
the top, and its requirements pin torch 2.11 from PyTorch's CPU index, which is not reachable here
(PyPI's Linux wheel pulls gigabytes of CUDA libraries), and transformers 4.57, which has no
`qwen3_5`; it also wants tokenizer files that a random specd checkpoint does not have. This file
needs only numpy: it reads safetensors itself (numpy has no bfloat16, so bf16 tensors are kept
as their uint16 bits), dequantizes compressed-tensors `pack-quantized` INT4 weights exactly,
(q - zero) * scale per group, and streams one tensor at a time so that a 4B model needs about one
layer of memory.

What it writes (facts from llama.cpp's src/models/qwen35.cpp and gguf-py's constants):
  * names: HF `model.layers.N.*` -> `blk.N.*` via gguf.TENSOR_NAMES; the DeltaNet layer's
    in_proj_qkv -> attn_qkv, in_proj_z -> attn_gate, in_proj_a -> ssm_alpha, in_proj_b ->
    ssm_beta, A_log -> ssm_a (stored as -exp(A_log)), dt_bias -> ssm_dt.bias, conv1d ->
    ssm_conv1d ([channels, kernel]), norm -> ssm_norm, out_proj -> ssm_out; the attention layer's
    q_proj (query and output gate interleaved per head, as in HF) -> attn_q, k/v/o, q_norm/k_norm.
  * Qwen3.5's RMSNorms scale by (1 + w): every norm but the DeltaNet's gated norm is written as
    1 + w.
  * with fewer key than value heads in DeltaNet, llama.cpp broadcasts key heads tiled
    (K0 K1 .. K0 K1 ..), HF groups value heads by key head, so the value heads are permuted
    (rows of qkv's V part, z, a, b, A_log, dt_bias, conv channels; columns of out_proj).
  * norms, 1-D tensors and the conv kernel in F32; matrices in --outtype (auto: BF16 where the
    checkpoint had bf16, F16 for dequantized INT4 (exact: a 4-bit code times a bf16 scale fits
    f16's 11-bit significand) and for float32).
  * no tokenizer: `tokenizer.ggml.model = none` with `qwen35.vocab_size`, which llama.cpp loads as
    that many dummy tokens; enough for llama-bench (random ids) and llama-quantize.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import struct
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

import gguf

_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_,
}


@dataclass
class Source:
    dtype: str            # safetensors dtype string
    array: np.ndarray     # a view into the mmapped file (bf16 as uint16)


def read_safetensors(model_dir: str) -> dict[str, Source]:
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        files = [os.path.join(model_dir, name) for name in files]
    else:
        files = sorted(glob.glob(os.path.join(model_dir, "model*.safetensors"))) or \
            sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    if not files:
        sys.exit(f"specd_to_gguf: no *.safetensors in {model_dir}")
    tensors: dict[str, Source] = {}
    for path in files:
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_len))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            dtype = _ST_DTYPES[info["dtype"]]
            array = data[begin:end].view(dtype).reshape(info["shape"])
            tensors[name] = Source(info["dtype"], array)
    return tensors


def to_f32(src: Source) -> np.ndarray:
    if src.dtype == "BF16":
        return (src.array.astype(np.uint32) << 16).view(np.float32)
    return src.array.astype(np.float32)


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))  # round to nearest even
    out = (rounded >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def unpack_int4_along_last(words: np.ndarray, count: int) -> np.ndarray:
    """int32 words, 8 nibbles each, element j at bits 4*(j%8) -> uint8 codes, last dim `count`."""
    w = np.ascontiguousarray(words).astype(np.uint32)                   # int32 bits, wrapped
    nibbles = (w[..., None] >> (np.arange(8, dtype=np.uint32) * np.uint32(4))) & np.uint32(0xF)
    return nibbles.astype(np.uint8).reshape(*words.shape[:-1], words.shape[-1] * 8)[..., :count]


def dequantize_pack_quantized(tensors: dict[str, Source], base: str) -> np.ndarray:
    """W[n, k] = (q - zero[n, g(k)]) * scale[n, g(k)], q and zero stored offset by 8."""
    rows, cols = (int(v) for v in np.asarray(tensors[base + ".weight_shape"].array).tolist())
    codes = unpack_int4_along_last(np.asarray(tensors[base + ".weight_packed"].array), cols)
    q = codes.astype(np.float32) - 8.0                                   # [N, K]
    scale = to_f32(tensors[base + ".weight_scale"])                      # [N, K/G]
    groups = scale.shape[1]
    if (g_idx_src := tensors.get(base + ".weight_g_idx")) is not None:
        group_of = np.asarray(g_idx_src.array).astype(np.int64)
    else:
        group_of = np.arange(cols) // (cols // groups)
    if (zp_src := tensors.get(base + ".weight_zero_point")) is not None:  # [ceil(N/8), K/G]
        zp = unpack_int4_along_last(np.asarray(zp_src.array).T, rows).T.astype(np.float32) - 8.0
        q -= zp[:, group_of]
    return q * scale[:, group_of]


def normalize_name(name: str) -> str | None:
    """HF name of the text model, `model.layers...`; None for what llama.cpp's qwen35 skips."""
    for prefix, repl in (("model.language_model.", "model."), ("language_model.model.", "model."),
                         ("language_model.", "")):
        if name.startswith(prefix):
            name = repl + name[len(prefix):]
            break
    if name.startswith(("model.visual.", "visual.", "mtp.", "model.mtp.")):
        return None
    return name


@dataclass
class Planned:
    name: str                      # GGUF tensor name
    shape: tuple[int, ...]         # numpy order (rows, cols)
    ggml_type: gguf.GGMLQuantizationType
    produce: Callable[[], np.ndarray]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("out")
    parser.add_argument("--outtype", choices=["auto", "f16", "bf16", "f32"], default="auto")
    args = parser.parse_args()

    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    hp = {**config, **config.get("text_config", {})}
    if hp.get("model_type") not in ("qwen3_5_text", "qwen3_5"):
        sys.exit(f"specd_to_gguf: model_type {hp.get('model_type')!r} is not Qwen3.5")
    rope = dict(hp.get("rope_parameters") or {})
    rope.setdefault("rope_theta", hp.get("rope_theta", 1e7))
    rope.setdefault("partial_rotary_factor", hp.get("partial_rotary_factor", 0.25))
    quant = config.get("quantization_config") or hp.get("quantization_config")
    if quant and quant.get("format", "pack-quantized") != "pack-quantized":
        sys.exit(f"specd_to_gguf: quantization {quant.get('format')!r} is not pack-quantized")

    n_layer = int(hp["num_hidden_layers"])
    n_embd = int(hp["hidden_size"])
    head_dim = int(hp.get("head_dim") or n_embd // hp["num_attention_heads"])
    nk, nv = int(hp["linear_num_key_heads"]), int(hp["linear_num_value_heads"])
    dk, dv = int(hp["linear_key_head_dim"]), int(hp["linear_value_head_dim"])
    if dk != dv:
        sys.exit("specd_to_gguf: llama.cpp's qwen35 needs equal DeltaNet key and value head dims")
    layer_types = hp.get("layer_types") or [
        "full_attention" if (i + 1) % int(hp.get("full_attention_interval", 4)) == 0
        else "linear_attention" for i in range(n_layer)]
    vocab_size = int(hp["vocab_size"])

    raw = read_safetensors(args.model_dir)
    tensors: dict[str, Source] = {}
    for name, src in raw.items():
        if (norm := normalize_name(name)) is not None:
            tensors[norm] = src
    linears = sorted({n[: -len(".weight_packed")] for n in tensors if n.endswith(".weight_packed")})
    dense = {n[: -len(".weight")] for n in tensors if n.endswith(".weight")}

    def matrix_type(kind: str) -> gguf.GGMLQuantizationType:
        T = gguf.GGMLQuantizationType
        if args.outtype != "auto":
            return {"f16": T.F16, "bf16": T.BF16, "f32": T.F32}[args.outtype]
        return T.BF16 if kind == "BF16" else T.F16

    def encode(x: np.ndarray, t: gguf.GGMLQuantizationType) -> np.ndarray:
        T = gguf.GGMLQuantizationType
        if t == T.F32:
            return np.ascontiguousarray(x, dtype=np.float32)
        if t == T.F16:
            return np.ascontiguousarray(x, dtype=np.float16)
        return f32_to_bf16_bits(x)

    # value heads: grouped by key head (HF) -> tiled (llama.cpp); an index permutation
    ratio = nv // nk
    head_perm = np.arange(nv).reshape(nk, ratio).T.reshape(-1)             # new head h <- old
    def v_perm(width: int) -> np.ndarray:
        return (head_perm[:, None] * width + np.arange(width)[None, :]).reshape(-1)
    reorder = nk != nv

    def load_matrix(hf: str) -> tuple[Callable[[], np.ndarray], str, tuple[int, int]]:
        """(loader giving float32 or uint16-bf16 bits, source kind, shape) of a Linear."""
        if hf in linears:
            rows, cols = (int(v) for v in np.asarray(tensors[hf + ".weight_shape"].array).tolist())
            return (lambda: dequantize_pack_quantized(tensors, hf)), "INT4", (rows, cols)
        src = tensors[hf + ".weight"]
        return (lambda: src.array), src.dtype, tuple(src.array.shape)

    plan: list[Planned] = []
    used: set[str] = set()

    def tname(t: gguf.MODEL_TENSOR, bid: int | None = None, suffix: str = ".weight") -> str:
        return gguf.TENSOR_NAMES[t].format(bid=bid) + suffix

    def add_matrix(gname: str, hf: str, rows_perm: np.ndarray | None = None,
                   cols_perm: np.ndarray | None = None) -> None:
        loader, kind, shape = load_matrix(hf)
        t = matrix_type(kind)
        used.update({hf + s for s in (".weight", ".weight_packed", ".weight_scale", ".weight_shape",
                                      ".weight_zero_point", ".weight_g_idx")})
        def produce() -> np.ndarray:
            x = loader()
            if rows_perm is not None:
                x = x[rows_perm]
            if cols_perm is not None:
                x = x[:, cols_perm]
            if x.dtype == np.uint16:                                      # bf16 bits
                if t == gguf.GGMLQuantizationType.BF16:
                    return np.ascontiguousarray(x)
                x = (x.astype(np.uint32) << 16).view(np.float32)
            return encode(x, t)
        plan.append(Planned(gname, shape, t, produce))

    def add_vector(gname: str, hf: str,
                   fn: Callable[[np.ndarray], np.ndarray] = lambda x: x) -> None:
        src = tensors[hf]
        used.add(hf)
        value = lambda: np.ascontiguousarray(fn(to_f32(src)), dtype=np.float32)
        shape = tuple(int(s) for s in src.array.shape)
        if hf.endswith("conv1d.weight"):
            shape = (shape[0], shape[-1])                                 # [C, 1, K] -> [C, K]
        plan.append(Planned(gname, shape, gguf.GGMLQuantizationType.F32, value))

    one_plus = lambda x: x + 1.0
    M = gguf.MODEL_TENSOR
    add_matrix(tname(M.TOKEN_EMBD), "model.embed_tokens")
    add_vector(tname(M.OUTPUT_NORM), "model.norm.weight", one_plus)
    if "lm_head.weight" in tensors or "lm_head.weight_packed" in tensors:
        add_matrix(tname(M.OUTPUT), "lm_head")

    key_width, value_width = nk * dk, nv * dv
    qkv_rows = np.concatenate([np.arange(2 * key_width), 2 * key_width + v_perm(dv)])
    for i in range(n_layer):
        p = f"model.layers.{i}."
        add_vector(tname(M.ATTN_NORM, i), p + "input_layernorm.weight", one_plus)
        add_vector(tname(M.ATTN_POST_NORM, i), p + "post_attention_layernorm.weight", one_plus)
        if layer_types[i] == "full_attention":
            a = p + "self_attn."
            add_matrix(tname(M.ATTN_Q, i), a + "q_proj")
            add_matrix(tname(M.ATTN_K, i), a + "k_proj")
            add_matrix(tname(M.ATTN_V, i), a + "v_proj")
            add_matrix(tname(M.ATTN_OUT, i), a + "o_proj")
            add_vector(tname(M.ATTN_Q_NORM, i), a + "q_norm.weight", one_plus)
            add_vector(tname(M.ATTN_K_NORM, i), a + "k_norm.weight", one_plus)
        else:
            a = p + "linear_attn."
            rp = (lambda x, perm: x[perm]) if reorder else (lambda x, perm: x)
            add_matrix(tname(M.ATTN_QKV, i), a + "in_proj_qkv", qkv_rows if reorder else None)
            add_matrix(tname(M.ATTN_GATE, i), a + "in_proj_z", v_perm(dv) if reorder else None)
            add_matrix(tname(M.SSM_ALPHA, i), a + "in_proj_a", head_perm if reorder else None)
            add_matrix(tname(M.SSM_BETA, i), a + "in_proj_b", head_perm if reorder else None)
            add_vector(tname(M.SSM_A, i, ""), a + "A_log", lambda x: -np.exp(rp(x, head_perm)))
            add_vector(tname(M.SSM_DT, i, ".bias"), a + "dt_bias", lambda x: rp(x, head_perm))
            add_vector(tname(M.SSM_CONV1D, i), a + "conv1d.weight",
                       lambda x: rp(x.reshape(x.shape[0], x.shape[-1]), qkv_rows))
            add_vector(tname(M.SSM_NORM, i), a + "norm.weight")
            add_matrix(tname(M.SSM_OUT, i), a + "out_proj", None, v_perm(dv) if reorder else None)
        m = p + "mlp."
        add_matrix(tname(M.FFN_GATE, i), m + "gate_proj")
        add_matrix(tname(M.FFN_UP, i), m + "up_proj")
        add_matrix(tname(M.FFN_DOWN, i), m + "down_proj")

    left = sorted(n for n in tensors if n not in used)
    if left:
        print(f"specd_to_gguf: not converted ({len(left)}): {', '.join(left[:8])}", file=sys.stderr)

    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN35]
    w = gguf.GGUFWriter(args.out + ".part", arch)
    w.add_name(os.path.basename(os.path.abspath(args.model_dir)))
    w.add_block_count(n_layer)
    w.add_context_length(int(hp.get("max_position_embeddings", 262144)))
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(int(hp["intermediate_size"]))
    w.add_head_count(int(hp["num_attention_heads"]))
    w.add_head_count_kv(int(hp["num_key_value_heads"]))
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(float(rope["rope_theta"]))
    w.add_rope_dimension_count(int(head_dim * float(rope["partial_rotary_factor"])))
    sections = list(rope.get("mrope_section") or [11, 11, 10])
    w.add_rope_dimension_sections((sections + [0, 0, 0, 0])[:4])
    w.add_layer_norm_rms_eps(float(hp.get("rms_norm_eps", 1e-6)))
    w.add_ssm_conv_kernel(int(hp["linear_conv_kernel_dim"]))
    w.add_ssm_state_size(dk)
    w.add_ssm_group_count(nk)
    w.add_ssm_time_step_rank(nv)
    w.add_ssm_inner_size(value_width)
    w.add_full_attention_interval(int(hp.get("full_attention_interval", 4)))
    w.add_recurrent_layers([t == "linear_attention" for t in layer_types])
    w.add_vocab_size(vocab_size)
    w.add_tokenizer_model("none")
    T = gguf.GGMLQuantizationType
    types = {p.ggml_type for p in plan if len(p.shape) == 2}
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16 if types == {T.BF16} else
                    gguf.LlamaFileType.ALL_F32 if types == {T.F32} else
                    gguf.LlamaFileType.MOSTLY_F16)

    np_dtypes = {T.F32: np.float32, T.F16: np.float16, T.BF16: np.uint16}
    for p in plan:
        np_dtype = np.dtype(np_dtypes[p.ggml_type])
        raw_dtype = p.ggml_type if p.ggml_type == T.BF16 else None
        w.add_tensor_info(p.name, p.shape, np_dtype, math.prod(p.shape) * np_dtype.itemsize,
                          raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for p in plan:
        data = p.produce()
        if tuple(data.shape) != tuple(p.shape):
            sys.exit(f"specd_to_gguf: {p.name}: shape {data.shape}, planned {p.shape}")
        w.write_tensor_data(data)
    w.close()
    os.replace(args.out + ".part", args.out)
    total = sum(math.prod(p.shape) for p in plan)
    print(f"specd_to_gguf: wrote {args.out}: {len(plan)} tensors, {total / 1e9:.2f} B parameters, "
          f"{os.path.getsize(args.out) / 2**30:.2f} GiB, matrices {sorted(t.name for t in types)}")


if __name__ == "__main__":
    main()
