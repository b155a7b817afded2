"""A family of random Qwen3.5 models built and saved by transformers, for the interop tests.

The reference fixture's shape is one member; the others make every size that can differ do so
(GQA groups of 3, three DeltaNet value heads per key head, key and value head dims that differ,
half-rotary heads, an irregular layer pattern), with tied and untied heads, in the text-only and
the multimodal checkpoint layout, in float32 and in bf16, so a loader cannot rely on one
shape's coincidences. Weights are random but not at transformers' initial values (norms, A_log,
dt_bias and conv taps away from 0 and 1), so a wrong norm flavour or head mapping shows.
`specd_forward` runs specd on the same ids.
"""
import math
import subprocess
from dataclasses import dataclass

import torch
from safetensors.torch import load_file
from transformers.models.qwen3_5 import configuration_qwen3_5 as configs
from transformers.models.qwen3_5 import modeling_qwen3_5 as models


@dataclass(frozen=True)
class Member:
    name: str
    text: dict  # Qwen3_5TextConfig arguments
    multimodal: bool = False  # Qwen3_5ForConditionalGeneration: model.language_model.* names
    dtype: torch.dtype = torch.float32  # what save_pretrained writes


def _text_config(vocab, hidden, mlp, layer_types, heads, kv_heads, head_dim, key_heads,
                 value_heads, key_dim, value_dim, rotary, theta, tied):
    rotary_pairs = int(head_dim * rotary) // 2
    sections = [rotary_pairs - 2 * (rotary_pairs // 4), rotary_pairs // 4, rotary_pairs // 4]
    return dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp,
                num_hidden_layers=len(layer_types), layer_types=layer_types,
                num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
                linear_num_key_heads=key_heads, linear_num_value_heads=value_heads,
                linear_key_head_dim=key_dim, linear_value_head_dim=value_dim,
                linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=4096,
                tie_word_embeddings=tied, eos_token_id=1, partial_rotary_factor=rotary,
                rope_parameters={"rope_type": "default", "rope_theta": theta,
                                 "partial_rotary_factor": rotary, "mrope_section": sections,
                                 "mrope_interleaved": True})


LINEAR, FULL = "linear_attention", "full_attention"
# The shape of ../shared/fixtures/qwen35-tiny-a.
FIXTURE_SHAPE = _text_config(320, 64, 128, [LINEAR, LINEAR, LINEAR, FULL], 4, 2, 32, 2, 4, 16,
                             16, 0.25, 1e7, tied=True)
ODD_SHAPES = _text_config(97, 48, 80, [LINEAR, FULL, LINEAR, LINEAR, FULL], 6, 2, 16, 2, 6, 12,
                          8, 0.5, 1e4, tied=False)

FAMILY = [
    Member("the fixture's shape, tied head", FIXTURE_SHAPE),
    Member("odd shapes, untied head", ODD_SHAPES),
    Member("odd shapes, tied head, multimodal layout", {**ODD_SHAPES, "tie_word_embeddings": True},
           multimodal=True),
    Member("the fixture's shape in bf16", FIXTURE_SHAPE, dtype=torch.bfloat16),
]


def _randomize(model, seed):
    generator = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return mean + std * torch.randn(shape, generator=generator)

    with torch.no_grad():
        for name, parameter in model.named_parameters():
            shape = parameter.shape
            if name.endswith("A_log"):
                value = torch.rand(shape, generator=generator) * math.log(16.0)
            elif name.endswith("dt_bias"):
                value = normal(shape, 0.5)
            elif name.endswith("linear_attn.norm.weight"):  # the gated norm scales by w
                value = normal(shape, 0.3, mean=1.0)
            elif "norm" in name and parameter.dim() == 1:  # the others by (1 + w)
                value = normal(shape, 0.3)
            elif "conv1d" in name:
                value = normal(shape, 0.4)
            elif "embed_tokens" in name:
                value = normal(shape, 1.0)
            elif parameter.dim() >= 2:
                value = normal(shape, 1.5 / math.sqrt(parameter[0].numel()))
            else:
                value = normal(shape, 0.1)
            parameter.copy_(value)


def build(member, seed):
    """The member as a transformers model in float32 with random weights."""
    text = configs.Qwen3_5TextConfig(**member.text)
    if not member.multimodal:
        model = models.Qwen3_5ForCausalLM(text)
    else:
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, patch_size=4,
                      out_hidden_size=text.hidden_size, num_position_embeddings=16)
        config = configs.Qwen3_5Config(text_config=text.to_dict(), vision_config=vision,
                                       tie_word_embeddings=text.tie_word_embeddings)
        model = models.Qwen3_5ForConditionalGeneration(config)
    model = model.float().eval()
    _randomize(model, seed)
    return model


def save(model, member, directory):
    """Writes the member as transformers does, and returns the model as saved, in float32 (bf16
    weights widened), for reference outputs of exactly what was written."""
    model.to(member.dtype).save_pretrained(directory)
    return model.float()


def forward(model, ids):
    """Logits [T, V] and hidden states [L + 1, T, H] of one forward over `ids`, no cache."""
    with torch.no_grad():
        output = model(torch.tensor([ids]), output_hidden_states=True, use_cache=False)
    return output.logits[0].float(), torch.stack([h[0] for h in output.hidden_states]).float()


def specd_forward(binary, directory, ids, out, *flags):
    """`specd forward` on `ids`: its output tensors (logits, and hidden states when asked)."""
    command = [binary, "forward", "--model", str(directory), "--ids", ",".join(map(str, ids)),
               "--out", str(out), *map(str, flags)]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {run.returncode}: {run.stderr}")
    return load_file(out)


def relative_difference(specd, reference):
    """Max |specd - reference| as a fraction of the reference's largest |value|."""
    assert specd.shape == reference.shape, (specd.shape, reference.shape)
    return ((specd - reference).abs().max() / reference.abs().max()).item()
