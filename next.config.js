/** @type {import('next').NextConfig} */
const nextConfig = {
  poweredByHeader: false,
  // Types are checked once for the whole project by `npm run typecheck` (part of `npm test`),
  // not again by every build.
  typescript: { ignoreBuildErrors: true },
  // Turbopack keeps its work in .next/cache for the next build, which `npm start` after an edit
  // reads. A clean checkout (CI: `.ci/run`) never builds again, so there it would only spend
  // seconds writing a cache nobody reads.
  experimental: { turbopackFileSystemCacheForBuild: !process.env.CI },
  // The worker-side packages stay plain Node modules on the server.
  serverExternalPackages: ["bullmq", "ioredis", "pino", "pg", "@prisma/adapter-pg"],
  // The same list as lib/security/headers.ts, which answers given before routing use (a test holds them equal).
  async headers() {
    return [
      {
        source: "/:path*",
        headers: [
          { key: "X-Content-Type-Options", value: "nosniff" },
          { key: "Referrer-Policy", value: "no-referrer" },
          { key: "X-Frame-Options", value: "DENY" },
        ],
      },
    ];
  },
};

export default nextConfig;
