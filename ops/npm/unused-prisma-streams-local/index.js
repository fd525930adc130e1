throw new Error(
  "@prisma/streams-local is not installed: Bounded never runs `prisma dev`; see ops/npm/unused-prisma-streams-local/package.json",
);
