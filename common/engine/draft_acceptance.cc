#include "common/engine/draft_acceptance.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"

namespace specd::engine {
namespace {

// The target's token at a row where `draft`, drawn from `q`, was offered; nullopt accepts the
// draft. `p` is the row's processed distribution [vocab] float32.
std::optional<int64_t> RejectionStep(const at::Tensor& p, int64_t draft, const DraftDistribution& q,
                                     model::Sampler& sampler) {
  const auto found = std::find(q.ids.begin(), q.ids.end(), draft);
  const double q_draft = q.probabilities[found - q.ids.begin()];
  const double p_draft = p[draft].item<double>();
  // Accepted with probability min(1, p / q).
  if (sampler.Uniform() * q_draft < p_draft) return std::nullopt;
  const at::Tensor ids = at::tensor(q.ids, at::kLong).to(p.device());
  const at::Tensor q_mass = at::tensor(q.probabilities, at::kFloat).to(p.device());
  at::Tensor residual = p.clone();
  residual.index_put_({ids}, (p.index_select(0, ids) - q_mass).clamp_min(0));
  const double mass = residual.sum().item<double>();
  // No residual mass means p ≤ q everywhere: the draft could not have been rejected but for
  // rounding, and p itself is then the right draw.
  return mass > 0 ? sampler.Draw(residual / mass) : sampler.Draw(p);
}

}  // namespace

absl::StatusOr<int64_t> AcceptDrafts(const at::Tensor& logits, std::span<const int64_t> block,
                                     std::span<const DraftDistribution> distributions,
                                     model::Sampler& sampler, std::span<const int64_t> prompt,
                                     const std::vector<int64_t>& generated, const EmitToken& emit,
                                     std::span<const int64_t> most_likely) {
  const auto drafts = static_cast<int64_t>(block.size()) - 1;
  const bool rejection = !distributions.empty() && !sampler.greedy();
  // Greedy: every row's token in one read from the device, before anything is emitted.
  const std::vector<int64_t> greedy =
      sampler.greedy() ? sampler.GreedyTokens(logits.narrow(0, 0, drafts + 1), prompt, generated,
                                              block.subspan(1), most_likely)
                       : std::vector<int64_t>();
  for (int64_t i = 0;; ++i) {
    // `generated` grows with every emit, so each row sees the output up to its own position.
    int64_t token = 0;
    bool accepted = false;
    if (sampler.greedy()) {
      token = greedy[i];
      accepted = i < drafts && block[i + 1] == token;
    } else if (rejection && i < drafts) {
      const std::optional<int64_t> replacement =
          RejectionStep(sampler.Probabilities(logits[i], prompt, generated), block[i + 1],
                        distributions[i], sampler);
      accepted = !replacement.has_value();
      token = accepted ? block[i + 1] : *replacement;
    } else {
      token = sampler.Sample(logits[i], prompt, generated);
      accepted = i < drafts && block[i + 1] == token;
    }
    absl::StatusOr<bool> ended = emit(token);
    if (!ended.ok()) return ended.status();
    if (*ended || !accepted) return i;
  }
}

absl::Status CheckDraftDistributions(const Drafts& drafts, int64_t vocab_size) {
  if (drafts.distributions.empty()) return absl::OkStatus();
  if (drafts.distributions.size() != drafts.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        drafts.distributions.size(), " draft distributions for ", drafts.tokens.size(), " drafts"));
  }
  for (size_t i = 0; i < drafts.tokens.size(); ++i) {
    const DraftDistribution& q = drafts.distributions[i];
    const auto error = [i](const auto&... what) {
      return absl::InvalidArgumentError(absl::StrCat("draft distribution ", i, ": ", what...));
    };
    if (q.ids.size() != q.probabilities.size()) {
      return error(q.ids.size(), " ids but ", q.probabilities.size(), " probabilities");
    }
    if (std::set<int64_t>(q.ids.begin(), q.ids.end()).size() != q.ids.size()) {
      return error("an id appears twice");
    }
    double total = 0;
    for (size_t k = 0; k < q.ids.size(); ++k) {
      if (q.ids[k] < 0 || q.ids[k] >= vocab_size) {
        return error("id ", q.ids[k], " is outside the vocabulary of ", vocab_size);
      }
      if (!(q.probabilities[k] >= 0 && q.probabilities[k] <= 1)) {
        return error("probability ", q.probabilities[k], " is outside [0, 1]");
      }
      total += q.probabilities[k];
    }
    if (std::abs(total - 1) > 1e-3) return error("the probabilities sum to ", total, ", not 1");
    const auto draft = std::find(q.ids.begin(), q.ids.end(), drafts.tokens[i]);
    if (draft == q.ids.end() || q.probabilities[draft - q.ids.begin()] <= 0) {
      return error("its draft ", drafts.tokens[i], " has no probability");
    }
  }
  return absl::OkStatus();
}

}  // namespace specd::engine
