// Shared by the rendezvous and Gloo tests: a file store and a world of N ranks.
#pragma once

#include <filesystem>

#include "trainer/rendezvous.h"

namespace rankscope::testing {

inline trainer::RendezvousSpec FileSpec(const std::filesystem::path& dir) {
  trainer::RendezvousSpec spec;
  spec.file_dir = dir.string();
  return spec;
}

inline trainer::World WorldOf(int rank, int world_size) {
  trainer::World world;
  world.rank = rank;
  world.world_size = world_size;
  world.launcher = "test";
  return world;
}

}  // namespace rankscope::testing
