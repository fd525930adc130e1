import { defineConfig } from "prisma/config";

// Prisma's env() throws when the variable is unset, which breaks `prisma generate`.
export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "" },
});
