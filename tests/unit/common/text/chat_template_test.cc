#include "common/text/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/common/text/qwen3_tokenizer.h"

namespace specd::text {
namespace {

using ::testing::ElementsAre;

const std::vector<ChatMessage> kSingleQuestion = {
    {ChatRole::kSystem, "You are helpful."},
    {ChatRole::kUser, "What is 2+2?"},
};

TEST(ChatTemplateTest, Qwen3_5OpensAThinkBlockInTheGenerationPrompt) {
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3_5).Render(kSingleQuestion),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
}

TEST(ChatTemplateTest, ThinkingOffClosesAnEmptyThinkBlockInBothFlavors) {
  const std::string expected =
      "<|im_start|>system\nYou are helpful.<|im_end|>\n"
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  for (ChatFlavor flavor : {ChatFlavor::kQwen3, ChatFlavor::kQwen3_5}) {
    EXPECT_EQ(*ChatTemplate(flavor).Render(kSingleQuestion, {.enable_thinking = false}), expected);
  }
}

TEST(ChatTemplateTest, Qwen3LeavesOpeningTheThinkBlockToTheModel) {
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3).Render(kSingleQuestion),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, RendersNoGenerationPromptWhenNotAsked) {
  EXPECT_EQ(
      *ChatTemplate(ChatFlavor::kQwen3_5).Render(kSingleQuestion, {.add_generation_prompt = false}),
      "<|im_start|>system\nYou are helpful.<|im_end|>\n"
      "<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
}

// A tool-using turn: the assistant answers twice after the last user query.
const std::vector<ChatMessage> kTurnsAfterTheLastQuery = {
    {ChatRole::kUser, "Hi"},
    {ChatRole::kAssistant, "Hello!"},
    {ChatRole::kUser, "Add 2 and 2."},
    {ChatRole::kAssistant, "Let me think.", "2 + 2 = 4"},
    {ChatRole::kAssistant, "It is 4."},
};

TEST(ChatTemplateTest, Qwen3_5GivesEveryAssistantTurnAfterTheLastQueryAThinkBlock) {
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3_5)
                 .Render(kTurnsAfterTheLastQuery, {.add_generation_prompt = false}),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nAdd 2 and 2.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n2 + 2 = 4\n</think>\n\nLet me think.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 4.<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen3GivesAThinkBlockOnlyToTheLastTurnOrTurnsWithReasoning) {
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3)
                 .Render(kTurnsAfterTheLastQuery, {.add_generation_prompt = false}),
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nAdd 2 and 2.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n2 + 2 = 4\n</think>\n\nLet me think.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nIt is 4.<|im_end|>\n");
  const std::vector<ChatMessage> unreasoned_middle_turn = {
      {ChatRole::kUser, "Q"}, {ChatRole::kAssistant, "A1"}, {ChatRole::kAssistant, "A2"}};
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3)
                 .Render(unreasoned_middle_turn, {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
}

TEST(ChatTemplateTest, TakesReasoningFromAThinkPrefixOfTheContent) {
  const std::vector<ChatMessage> messages = {
      {ChatRole::kUser, "Q"},
      {ChatRole::kAssistant, "<think>\nstep one\nstep two\n</think>\n\nThe answer."}};
  EXPECT_EQ(
      *ChatTemplate(ChatFlavor::kQwen3_5).Render(messages, {.add_generation_prompt = false}),
      "<|im_start|>user\nQ<|im_end|>\n"
      "<|im_start|>assistant\n<think>\nstep one\nstep two\n</think>\n\nThe answer.<|im_end|>\n");
}

TEST(ChatTemplateTest, DropsTheReasoningOfTurnsBeforeTheLastQuery) {
  const std::vector<ChatMessage> messages = {{ChatRole::kUser, "Q1"},
                                             {ChatRole::kAssistant, "A1", "old thoughts"},
                                             {ChatRole::kUser, "Q2"}};
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3_5).Render(messages, {.add_generation_prompt = false}),
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen3_5TrimsContentAndQwen3KeepsIt) {
  const std::vector<ChatMessage> messages = {{ChatRole::kUser, "  padded \n"}};
  const ChatRenderOptions no_prompt = {.add_generation_prompt = false};
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3_5).Render(messages, no_prompt),
            "<|im_start|>user\npadded<|im_end|>\n");
  EXPECT_EQ(*ChatTemplate(ChatFlavor::kQwen3).Render(messages, no_prompt),
            "<|im_start|>user\n  padded \n<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen3_5RejectsWhatItsTemplateRejects) {
  const ChatTemplate qwen3_5(ChatFlavor::kQwen3_5);
  EXPECT_FALSE(qwen3_5.Render({}).ok());
  const std::vector<ChatMessage> no_user = {{ChatRole::kSystem, "S"}};
  EXPECT_EQ(qwen3_5.Render(no_user).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<ChatMessage> late_system = {{ChatRole::kUser, "Q"}, {ChatRole::kSystem, "S"}};
  EXPECT_EQ(qwen3_5.Render(late_system).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, RenderedPromptEncodesToTheChatMarkupIds) {
  const Tokenizer& tokenizer = Qwen3Tokenizer();
  const std::vector<ChatMessage> messages = {{ChatRole::kUser, "Hi"}};
  const std::string prompt = *ChatTemplate(ChatFlavor::kQwen3_5).Render(messages);
  const TokenId im_start = *tokenizer.TokenToId("<|im_start|>");
  const TokenId im_end = *tokenizer.TokenToId("<|im_end|>");
  const TokenId think = *tokenizer.TokenToId("<think>");
  const TokenId user = *tokenizer.TokenToId("user");
  const TokenId assistant = *tokenizer.TokenToId("assistant");
  const TokenId hi = *tokenizer.TokenToId("Hi");
  const TokenId newline = *tokenizer.TokenToId("Ċ");
  EXPECT_THAT(*tokenizer.Encode(prompt), ElementsAre(im_start, user, newline, hi, im_end, newline,
                                                     im_start, assistant, newline, think, newline));
  EXPECT_EQ(im_start, 151644);
  EXPECT_EQ(im_end, 151645);
  EXPECT_EQ(think, 151667);
}

}  // namespace
}  // namespace specd::text
