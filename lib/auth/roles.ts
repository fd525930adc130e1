export const ROLES = ["viewer", "operator"] as const;
export type Role = (typeof ROLES)[number];

/** Who is calling: a signed-in user or the holder of an API token. */
export interface Principal {
  userId: string;
  username: string;
  role: Role;
  via: "session" | "token";
}

const RANK: Record<Role, number> = { viewer: 1, operator: 2 };

/** An operator may do everything a viewer may. */
export function hasRole(principal: Principal, needed: Role): boolean {
  return RANK[principal.role] >= RANK[needed];
}
