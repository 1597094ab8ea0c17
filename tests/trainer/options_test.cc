// rankscope-trainer's command line: defaults, every option reaching its field, and errors
// that are one line naming the offending option.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "trainer/options.h"

namespace rankscope::trainer {
namespace {

using Args = std::vector<std::string>;

TEST(ParseCommandLineTest, Defaults) {
  Result<CommandLine> parsed = ParseCommandLine({});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->exit_now);
  const TrainerOptions& o = parsed->options;
  const TrainerOptions d;
  EXPECT_EQ(o.features, 256);
  EXPECT_EQ(o.width, 1024);
  EXPECT_EQ(o.depth, 4);
  EXPECT_EQ(o.classes, 32);
  EXPECT_EQ(o.activation, kernels::Activation::kGelu);
  EXPECT_EQ(o.dataset_size, 1 << 16);
  EXPECT_EQ(o.batch, 64);
  EXPECT_EQ(o.accum, 1);
  EXPECT_EQ(o.steps, 30);
  EXPECT_EQ(o.seed, 1u);
  EXPECT_EQ(o.optimizer, OptimizerKind::kSgd);
  EXPECT_DOUBLE_EQ(o.lr, 0.1);
  EXPECT_EQ(o.lr_reference_batch, 256);
  EXPECT_EQ(o.warmup_steps, 5);
  EXPECT_DOUBLE_EQ(o.momentum, 0.9);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(o.clip_grad_norm, 0.0);
  EXPECT_DOUBLE_EQ(o.bucket_mb, 25.0);
  EXPECT_DOUBLE_EQ(o.first_bucket_mb, 1.0);
  EXPECT_TRUE(o.overlap);
  EXPECT_EQ(o.backend, Backend::kAuto);
  EXPECT_EQ(o.precision, Precision::kFp32);
  EXPECT_EQ(o.rendezvous, "");
  EXPECT_EQ(o.threads, 0);
  EXPECT_DOUBLE_EQ(o.timeout_s, 60.0);
  EXPECT_EQ(o.checkpoint, "");
  EXPECT_EQ(o.checkpoint_every, 0);
  EXPECT_EQ(o.resume, "");
  EXPECT_EQ(o.metrics_out, "");
  EXPECT_EQ(o.log_every, 10);
  EXPECT_FALSE(o.quiet);
  EXPECT_EQ(o.fault_rank, -1);
  EXPECT_EQ(o.fault_step, -1);
  EXPECT_DOUBLE_EQ(o.extra_step_delay_ms, 0.0);
  // The struct's defaults are the command line's.
  EXPECT_EQ(o.features, d.features);
  EXPECT_EQ(o.steps, d.steps);
}

TEST(ParseCommandLineTest, EveryOptionReachesItsField) {
  Result<CommandLine> parsed = ParseCommandLine(
      {"--features", "10", "--width", "20", "--depth", "0", "--classes", "2", "--activation", "relu",
       "--samples", "100", "--seed", "7", "--batch", "8", "--accum", "2", "--steps", "3", "--optimizer", "adamw",
       "--lr", "0.5", "--lr-reference-batch", "64", "--warmup-steps", "0", "--momentum", "0.8",
       "--weight-decay", "0.01", "--clip-grad-norm", "1.5", "--bucket-mb", "0.5", "--first-bucket-mb", "0.25",
       "--no-overlap", "--backend", "gloo", "--precision", "fp32", "--rdzv", "file:/tmp/rdzv", "--timeout", "5",
       "--threads", "2", "--checkpoint", "/tmp/c.ckpt", "--checkpoint-every", "2", "--resume", "/tmp/r.ckpt",
       "--metrics-out", "m{rank}.json", "--log-every", "0", "--quiet", "--fault-rank", "1", "--fault-step", "3",
       "--extra-step-delay-ms", "2.5", "--extra-step-work-ms", "1.5", "--link-gbps", "8", "--slow-rank", "1:15", "--slow-rank-busy"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->exit_now);
  const TrainerOptions& o = parsed->options;
  EXPECT_EQ(o.features, 10);
  EXPECT_EQ(o.width, 20);
  EXPECT_EQ(o.depth, 0);
  EXPECT_EQ(o.classes, 2);
  EXPECT_EQ(o.activation, kernels::Activation::kRelu);
  EXPECT_EQ(o.dataset_size, 100);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.batch, 8);
  EXPECT_EQ(o.accum, 2);
  EXPECT_EQ(o.steps, 3);
  EXPECT_EQ(o.optimizer, OptimizerKind::kAdamW);
  EXPECT_DOUBLE_EQ(o.lr, 0.5);
  EXPECT_EQ(o.lr_reference_batch, 64);
  EXPECT_EQ(o.warmup_steps, 0);
  EXPECT_DOUBLE_EQ(o.momentum, 0.8);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(o.clip_grad_norm, 1.5);
  EXPECT_DOUBLE_EQ(o.bucket_mb, 0.5);
  EXPECT_DOUBLE_EQ(o.first_bucket_mb, 0.25);
  EXPECT_FALSE(o.overlap);
  EXPECT_EQ(o.backend, Backend::kGloo);
  EXPECT_EQ(o.precision, Precision::kFp32);
  EXPECT_EQ(o.rendezvous, "file:/tmp/rdzv");
  EXPECT_DOUBLE_EQ(o.timeout_s, 5.0);
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.checkpoint, "/tmp/c.ckpt");
  EXPECT_EQ(o.checkpoint_every, 2);
  EXPECT_EQ(o.resume, "/tmp/r.ckpt");
  EXPECT_EQ(o.metrics_out, "m{rank}.json");
  EXPECT_EQ(o.log_every, 0);
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(o.fault_rank, 1);
  EXPECT_EQ(o.fault_step, 3);
  EXPECT_DOUBLE_EQ(o.extra_step_delay_ms, 2.5);
  EXPECT_DOUBLE_EQ(o.extra_step_work_ms, 1.5);
  EXPECT_DOUBLE_EQ(o.link_gbps, 8);
  EXPECT_EQ(o.slow_rank, 1);
  EXPECT_DOUBLE_EQ(o.slow_rank_ms, 15);
  EXPECT_TRUE(o.slow_rank_busy);
}

TEST(ParseCommandLineTest, PipelineOptionsNeedAPipelineAndSayWhatIsWrong) {
  Result<CommandLine> parsed = ParseCommandLine(
      {"--parallel", "pipeline", "--stages", "2", "--micro-batches", "8", "--schedule", "gpipe", "--stage-layers", "2,3"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->options.parallel, Parallelism::kPipeline);
  EXPECT_EQ(parsed->options.stages, 2);
  EXPECT_EQ(parsed->options.micro_batches, 8);
  EXPECT_EQ(parsed->options.schedule, PipelineSchedule::kGPipe);
  EXPECT_EQ(parsed->options.stage_layers, (std::vector<int>{2, 3}));
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--stages", "2"}, "--stages needs --parallel pipeline"},
      {{"--parallel", "fsdp", "--schedule", "gpipe"}, "--schedule needs --parallel pipeline"},
      {{"--parallel", "pipeline", "--accum", "2"},
       "--parallel pipeline: a pipeline accumulates over its micro-batches; use --micro-batches, not --accum"},
      {{"--parallel", "pipeline", "--micro-batches", "0"}, "--micro-batches must be at least 1"},
      {{"--parallel", "pipeline", "--schedule", "zb"}, "--schedule: 'zb' is not one of 1f1b|gpipe; see rankscope-trainer --help"},
  };
  for (const auto& [args, message] : refused) {
    Result<CommandLine> rejected = ParseCommandLine(args);
    EXPECT_FALSE(rejected.ok());
    EXPECT_EQ(rejected.status().message(), message);
  }
}

TEST(ParseCommandLineTest, NoOverlapFlag) {
  Result<CommandLine> on = ParseCommandLine({"--batch", "4"});
  Result<CommandLine> off = ParseCommandLine({"--no-overlap"});
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_TRUE(on->options.overlap);
  EXPECT_FALSE(off->options.overlap);
}

TEST(ParseCommandLineTest, SlowRankTakesRankColonMilliseconds) {
  Result<CommandLine> parsed = ParseCommandLine({"--slow-rank", "1:20.5"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->options.slow_rank, 1);
  EXPECT_DOUBLE_EQ(parsed->options.slow_rank_ms, 20.5);
  Result<CommandLine> none = ParseCommandLine({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->options.slow_rank, -1);
  for (const char* bad : {"1", "x:5", "1:", ":5", "1:5ms", "-1:5", "1:-5", "1:nan", "1:1e999"}) {
    Result<CommandLine> rejected = ParseCommandLine({"--slow-rank", bad});
    ASSERT_FALSE(rejected.ok()) << bad;
    EXPECT_NE(rejected.status().message().find("--slow-rank"), std::string::npos) << rejected.status().message();
  }
}

TEST(ParseCommandLineTest, HangAndMismatchRankTakeRankColonStep) {
  Result<CommandLine> parsed = ParseCommandLine({"--hang-rank", "2:5", "--mismatch-rank=1:0", "--steps", "6"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->options.hang_rank, 2);
  EXPECT_EQ(parsed->options.hang_step, 5);
  EXPECT_EQ(parsed->options.mismatch_rank, 1);
  EXPECT_EQ(parsed->options.mismatch_step, 0);
  Result<CommandLine> none = ParseCommandLine({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->options.hang_rank, -1);
  EXPECT_EQ(none->options.mismatch_rank, -1);
  for (const char* option : {"--hang-rank", "--mismatch-rank"}) {
    // The last step of 30 (counted from 0) is the last one accepted.
    Result<CommandLine> last = ParseCommandLine({option, "0:29"});
    EXPECT_TRUE(last.ok()) << option << ": " << last.status().ToString();
    for (const char* bad : {"1", "x:5", "1:", ":5", "1:5s", "-1:5", "1:-1", "1:2.5", "1:30", "0:99999999999999999999",
                            "99999999999:1", " 1:5", "1:5:6"}) {
      Result<CommandLine> rejected = ParseCommandLine({option, bad});
      ASSERT_FALSE(rejected.ok()) << option << " " << bad;
      const std::string message = rejected.status().message();
      EXPECT_EQ(rejected.status().code(), StatusCode::kInvalidArgument) << message;
      EXPECT_NE(message.find(option), std::string::npos) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  }
  // A step the run never reaches says which steps there are.
  Result<CommandLine> late = ParseCommandLine({"--hang-rank", "1:10", "--steps", "10"});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().message(),
            "--hang-rank 1:10: the step must be in 0..9 (steps count from 0; --steps 10)");
  Result<CommandLine> form = ParseCommandLine({"--mismatch-rank", "1"});
  ASSERT_FALSE(form.ok());
  EXPECT_EQ(form.status().message(), "--mismatch-rank '1': expected RANK:STEP, e.g. 1:5");
}

TEST(ParseCommandLineTest, ChoicesIgnoreCaseAndEqualsSyntaxWorks) {
  Result<CommandLine> parsed =
      ParseCommandLine({"--activation=GELU", "--backend", "NCCL", "--precision=bf16", "--optimizer", "SGD"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->options.activation, kernels::Activation::kGelu);
  EXPECT_EQ(parsed->options.backend, Backend::kNccl);
  EXPECT_EQ(parsed->options.precision, Precision::kBf16);
  EXPECT_EQ(parsed->options.optimizer, OptimizerKind::kSgd);
}

TEST(ParseCommandLineTest, HelpExitsWithTheOptionList) {
  Result<CommandLine> parsed = ParseCommandLine({"--help"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->exit_now);
  EXPECT_NE(parsed->text.find("--bucket-mb"), std::string::npos) << parsed->text;
  EXPECT_NE(parsed->text.find("--no-overlap"), std::string::npos);
  EXPECT_NE(parsed->text.find("--checkpoint"), std::string::npos);
  // The planted failures say how their steps are counted.
  EXPECT_NE(parsed->text.find("--hang-rank"), std::string::npos);
  EXPECT_NE(parsed->text.find("--mismatch-rank"), std::string::npos);
  EXPECT_NE(parsed->text.find("STEP counts from 0"), std::string::npos) << parsed->text;
  // The fault-injection hooks are not advertised.
  EXPECT_EQ(parsed->text.find("--fault-rank"), std::string::npos);
  // -h too.
  Result<CommandLine> short_help = ParseCommandLine({"-h"});
  ASSERT_TRUE(short_help.ok());
  EXPECT_TRUE(short_help->exit_now);
}

TEST(ParseCommandLineTest, VersionExits) {
  Result<CommandLine> parsed = ParseCommandLine({"--version"});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->exit_now);
  ASSERT_FALSE(parsed->text.empty());
  EXPECT_EQ(parsed->text.back(), '\n');
  EXPECT_EQ(parsed->text.find("--"), std::string::npos) << parsed->text;
}

struct BadCase {
  Args args;
  std::string option;  // the option the message must name
};

TEST(ParseCommandLineTest, EveryErrorIsOneLineNamingTheOption) {
  const std::vector<BadCase> cases = {
      {{"--batch", "0"}, "--batch"},
      {{"--batch", "-3"}, "--batch"},
      {{"--accum", "-1"}, "--accum"},
      {{"--accum", "0"}, "--accum"},
      {{"--steps", "x"}, "--steps"},
      {{"--steps", "0"}, "--steps"},
      {{"--features", "0"}, "--features"},
      {{"--width", "0"}, "--width"},
      {{"--depth", "-1"}, "--depth"},
      {{"--classes", "1"}, "--classes"},
      {{"--lr", "0"}, "--lr"},
      {{"--lr-reference-batch", "0"}, "--lr-reference-batch"},
      {{"--bucket-mb", "0"}, "--bucket-mb"},
      {{"--first-bucket-mb", "-1"}, "--first-bucket-mb"},
      {{"--timeout", "0"}, "--timeout"},
      {{"--momentum", "1"}, "--momentum"},
      {{"--momentum", "-0.5"}, "--momentum"},
      {{"--weight-decay", "-1"}, "--weight-decay"},
      {{"--clip-grad-norm", "-1"}, "--clip-grad-norm"},
      {{"--warmup-steps", "-1"}, "--warmup-steps"},
      {{"--threads", "-2"}, "--threads"},
      {{"--samples", "4", "--batch", "8"}, "--samples"},
      {{"--width", "100000"}, "too large"},
      {{"--backend", "foo"}, "--backend"},
      {{"--activation", "tanh"}, "--activation"},
      {{"--optimizer", "lamb"}, "--optimizer"},
      {{"--precision", "fp8"}, "--precision"},
      {{"--precision", "bf16", "--backend", "gloo"}, "--precision"},
      {{"--checkpoint-every", "5"}, "--checkpoint-every"},
      {{"--checkpoint-every", "-1", "--checkpoint", "c"}, "--checkpoint-every"},
      {{"--extra-step-delay-ms", "-1"}, "--extra-step-delay-ms"},
      {{"--extra-step-work-ms", "-1"}, "--extra-step-work-ms"},
      {{"--link-gbps", "-1"}, "--link-gbps"},
      {{"--link-gbps", "8", "--backend", "nccl"}, "--link-gbps"},
      {{"--lr", "fast"}, "--lr"},
      {{"--bogus"}, "--bogus"},
      {{"--batch"}, "--batch"},
  };
  for (const BadCase& c : cases) {
    std::string joined;
    for (const std::string& arg : c.args) joined += " " + arg;
    SCOPED_TRACE("args:" + joined);
    Result<CommandLine> parsed = ParseCommandLine(c.args);
    ASSERT_FALSE(parsed.ok()) << "accepted";
    const std::string message = parsed.status().message();
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << message;
    EXPECT_NE(message.find(c.option), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_FALSE(message.empty());
  }
}

TEST(ParseCommandLineTest, ValidCornerCases) {
  // depth 0 (a linear model), the smallest dataset, bf16 with the automatic backend,
  // --checkpoint-every with --checkpoint.
  for (const Args& args : std::vector<Args>{{"--depth", "0"},
                                            {"--samples", "8", "--batch", "8"},
                                            {"--precision", "bf16"},
                                            {"--checkpoint", "c.ckpt", "--checkpoint-every", "3"},
                                            {"--momentum", "0"}}) {
    Result<CommandLine> parsed = ParseCommandLine(args);
    EXPECT_TRUE(parsed.ok()) << args[0] << ": " << parsed.status().ToString();
  }
}

TEST(OptionNamesTest, Names) {
  EXPECT_STREQ(BackendName(Backend::kAuto), "auto");
  EXPECT_STREQ(BackendName(Backend::kNccl), "nccl");
  EXPECT_STREQ(BackendName(Backend::kGloo), "gloo");
  EXPECT_STREQ(PrecisionName(Precision::kFp32), "fp32");
  EXPECT_STREQ(PrecisionName(Precision::kBf16), "bf16");
  EXPECT_STREQ(ActivationName(kernels::Activation::kGelu), "gelu");
  EXPECT_STREQ(ActivationName(kernels::Activation::kRelu), "relu");
  EXPECT_STREQ(ActivationName(kernels::Activation::kNone), "none");
  EXPECT_STREQ(OptimizerName(OptimizerKind::kSgd), "sgd");
  EXPECT_STREQ(OptimizerName(OptimizerKind::kAdamW), "adamw");
}

}  // namespace
}  // namespace rankscope::trainer
