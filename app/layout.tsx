import type { Metadata } from "next";
import { connection } from "next/server";
import type { ReactNode } from "react";
import "./globals.css";

export const metadata: Metadata = {
  title: { default: "Bounded", template: "%s · Bounded" },
  description: "Background work with budgets you can see.",
};

/**
 * Every page renders per request: its scripts carry the nonce of that response's
 * Content-Security-Policy (proxy.ts), which a page prerendered at build time could not know.
 */
export default async function RootLayout({ children }: { children: ReactNode }) {
  await connection();
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  );
}
