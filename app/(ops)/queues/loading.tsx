export { OpsLoading as default } from "@/app/components/ops-loading";
